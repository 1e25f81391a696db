import { Clock, Data, Duration, Effect, Metric, Option, Queue } from "effect"
import type { DeadLetter, DeadLetterQueue } from "../../DeadLetter.js"
import type { MemoryOptions, Message, QueueSource, ReceiveOptions, ReleaseOptions } from "../../QueueSource.js"
import type * as Api from "../../QueueSource.js"
import type { Fields } from "../errorFields.js"
import { MemoryState } from "./memoryState.js"
import { labels, observeDepth } from "./metrics.js"
import { listLimit, visibilityMillis, withAckMany } from "./shared.js"

/** Defined here, re-exported by `QueueSource.ts`: every source reaches it without importing a public module. */
export class QueueError extends Data.TaggedError("QueueError")<Fields<Api.QueueError>> {
  override get message(): string {
    const cause = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `queue "${this.queue}": ${this.operation} failed: ${cause}`
  }
}

/** The memory source: its state lives in `MemoryState`; every operation reads the time from the `Clock`. */
export const memory = <A>(options: MemoryOptions): Effect.Effect<QueueSource<A>> => {
  const visibility = visibilityMillis("QueueSource.memory", options.visibilityTimeout)
  const name = options.name ?? "memory"
  return Effect.map(Queue.unbounded<number>(), (ready) => {
    const state = new MemoryState<A>(ready, visibility)
    const tags = labels(name)
    const setDepth = observeDepth(tags.depth)
    const now = <B>(f: (now: number) => B) => Effect.map(Clock.currentTimeMillis, f)

    const receive = (max: number, opts?: ReceiveOptions): Effect.Effect<ReadonlyArray<Message<A>>> =>
      Effect.flatMap(Clock.currentTimeMillis, (at) => {
        state.promote(at)
        // Effect 4 has no `Queue.takeUpTo`: the ready queue is drained synchronously, up to `max`
        const out: Array<Message<A>> = []
        while (out.length < max) {
          const taken = Queue.takeUnsafe(ready)
          if (taken === undefined || taken._tag === "Failure") break
          const message = state.claim(taken.value, at, opts?.runsSuspectsAlone === true)
          if (message !== undefined) out.push(message)
        }
        return Effect.succeed(out)
      })

    const release = (message: Message<A>, opts?: ReleaseOptions): Effect.Effect<boolean> =>
      now((at) => state.release(message, opts, opts?.delay === undefined ? 0 : Duration.toMillis(opts.delay), at))

    const deadLetter = (message: Message<A>, reason: string): Effect.Effect<boolean> =>
      Effect.flatMap(
        now((at) => state.deadLetter(message, reason, at)),
        (moved) => moved ? Effect.as(setDepth(state.dlq.size), true) : Effect.succeed(false)
      )

    return withAckMany({
      name,
      visibilityTimeout: Duration.millis(visibility),
      send: (messages) =>
        now((at) => {
          for (const message of messages) state.enqueue(message.id, message.key, message.body, at)
        }),
      receive,
      // fenced like the others: only the current delivery may delete the message
      ack: (message) => Effect.sync(() => state.ack(message)),
      extend: (message) => now((at) => state.extend(message, at)),
      markAlone: (message) => now((at) => state.markAlone(message, at)),
      release,
      deadLetter,
      deadLetters: memoryDeadLetters(state, setDepth, tags.redriven)
    }, (messages: ReadonlyArray<Message<A>>) => Effect.sync(() => messages.map((message) => state.ack(message))))
  })
}

const memoryDeadLetters = <A>(
  state: MemoryState<A>,
  setDepth: (depth: number) => Effect.Effect<number>,
  redriven: Metric.Counter<number>
): DeadLetterQueue<A> => {
  const { dlq } = state
  const pick = (ids: ReadonlyArray<string> | undefined): Array<DeadLetter<A>> =>
    ids === undefined
      ? [...dlq.values()]
      : ids.flatMap((id) => {
        const entry = dlq.get(id)
        return entry === undefined ? [] : [entry]
      })
  return {
    list: (opts) =>
      Effect.sync(() => {
        const limit = listLimit(opts)
        const out: Array<DeadLetter<A>> = []
        for (const entry of dlq.values()) {
          if (out.length >= limit) break
          out.push(entry)
        }
        return out
      }),
    inspect: (id) => Effect.sync(() => Option.fromNullishOr(dlq.get(id))),
    redrive: (ids) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const moved = pick(ids)
        for (const entry of moved) {
          dlq.delete(entry.id)
          state.enqueue(entry.id, entry.key, entry.body, now)
        }
        return Effect.as(
          Effect.andThen(Metric.update(redriven, moved.length), setDepth(dlq.size)),
          moved.length
        )
      }),
    purge: (ids) =>
      Effect.suspend(() => {
        const gone = pick(ids)
        for (const entry of gone) dlq.delete(entry.id)
        return Effect.as(setDepth(dlq.size), gone.length)
      }),
    depth: Effect.suspend(() => setDepth(dlq.size))
  }
}
