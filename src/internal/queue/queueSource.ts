import { Chunk, Clock, Data, Duration, Effect, Option, Queue } from "effect"
import * as visibilityRules from "../../core/visibility.js"
import type { DeadLetter, DeadLetterQueue } from "../../DeadLetter.js"
import type { MemoryOptions, Message, QueueSource, ReleaseOptions } from "../../QueueSource.js"
import type * as Api from "../../QueueSource.js"
import type { Fields } from "../errorFields.js"
import { MinHeap } from "../heap.js"
import { labels, observeDepth } from "./metrics.js"
import { listLimit, parseReceipt, visibilityMillis } from "./shared.js"

/** Defined here, re-exported by `QueueSource.ts`: every source reaches it without importing a public module. */
export class QueueError extends Data.TaggedError("QueueError")<Fields<Api.QueueError>> {
  override get message(): string {
    const cause = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `queue "${this.queue}": ${this.operation} failed: ${cause}`
  }
}

const READY = 0
const IN_FLIGHT = 1
const DELAYED = 2

interface Entry<A> {
  readonly seq: number
  readonly id: string
  readonly key: string | undefined
  readonly body: A
  readonly enqueuedAt: number
  receiveCount: number
  /** Bumped on every claim and release: a receipt or timer of an older generation is stale. */
  generation: number
  state: number
  lastReceivedAt: number
  lastError: string | undefined
}

interface Timer {
  readonly at: number
  readonly seq: number
  readonly generation: number
}

/**
 * Visible messages wait in an Effect `Queue` (by sequence number); invisible ones (claimed, or released
 * with a delay) sit in a timer heap and are moved back to the queue when `receive` finds their time has
 * come. Every state change bumps the entry's generation, so stale timers and receipts are ignored.
 */
export const memory = <A>(options: MemoryOptions): Effect.Effect<QueueSource<A>> => {
  const visibility = visibilityMillis("QueueSource.memory", options.visibilityTimeout)
  const name = options.name ?? "memory"
  return Effect.map(Queue.unbounded<number>(), (ready) => {
    const tags = labels(name)
    const setDepth = observeDepth(tags.base)
    let nextSeq = 0
    const entries = new Map<number, Entry<A>>()
    const timers = new MinHeap<Timer>()
    const dlq = new Map<string, DeadLetter<A>>()

    const enqueue = (id: string, key: string | undefined, body: A, now: number) => {
      const entry: Entry<A> = {
        seq: ++nextSeq,
        id,
        key,
        body,
        enqueuedAt: now,
        receiveCount: 0,
        generation: 0,
        state: READY,
        lastReceivedAt: now,
        lastError: undefined
      }
      entries.set(entry.seq, entry)
      ready.unsafeOffer(entry.seq)
    }

    const hide = (entry: Entry<A>, until: number, state: number) => {
      entry.generation++
      entry.state = state
      timers.push({ at: until, seq: entry.seq, generation: entry.generation })
    }

    const promote = (now: number) => {
      for (let top = timers.peek(); top !== undefined && top.at <= now; top = timers.peek()) {
        timers.pop()
        const entry = entries.get(top.seq)
        if (entry === undefined || entry.generation !== top.generation) continue
        entry.generation++
        entry.state = READY
        ready.unsafeOffer(entry.seq)
      }
    }

    /** The entry a receipt names, if the receipt is still current. */
    const current = (message: Message<A>): Entry<A> | undefined => {
      const [seq, generation] = parseReceipt(message.receipt)
      const entry = entries.get(seq)
      return entry !== undefined && entry.generation === generation && entry.state === IN_FLIGHT ? entry : undefined
    }

    const receive = (max: number): Effect.Effect<ReadonlyArray<Message<A>>> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        promote(now)
        return Effect.map(Queue.takeUpTo(ready, max), (seqs) => {
          const out: Array<Message<A>> = []
          for (const seq of Chunk.toReadonlyArray(seqs)) {
            const entry = entries.get(seq)
            if (entry === undefined || entry.state !== READY) continue
            entry.receiveCount = visibilityRules.delivered(entry.receiveCount)
            entry.lastReceivedAt = now
            hide(entry, visibilityRules.invisibleUntil(now, visibility), IN_FLIGHT)
            out.push({
              id: entry.id,
              key: entry.key,
              body: entry.body,
              receiveCount: entry.receiveCount,
              enqueuedAt: entry.enqueuedAt,
              receivedAt: now,
              lastError: entry.lastError,
              receipt: `${entry.seq}:${entry.generation}`
            })
          }
          return out
        })
      })

    const release = (message: Message<A>, opts?: ReleaseOptions): Effect.Effect<boolean> =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const entry = current(message)
        if (entry === undefined) return false
        if (opts?.error !== undefined) entry.lastError = opts.error
        entry.receiveCount = visibilityRules.afterRelease(entry.receiveCount, opts?.undoReceive === true)
        const visibleAt = visibilityRules.visibleAfterRelease(
          now,
          opts?.delay === undefined ? 0 : Duration.toMillis(opts.delay)
        )
        if (visibleAt === undefined) {
          entry.generation++
          entry.state = READY
          ready.unsafeOffer(entry.seq)
        } else {
          hide(entry, visibleAt, DELAYED)
        }
        return true
      })

    const deadLetter = (message: Message<A>, reason: string): Effect.Effect<boolean> =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const entry = current(message)
        if (entry === undefined) return Effect.succeed(false)
        entries.delete(entry.seq)
        dlq.delete(entry.id) // re-inserted last: the map keeps dead-lettering order
        dlq.set(entry.id, {
          id: entry.id,
          key: entry.key,
          body: entry.body,
          reason,
          receiveCount: entry.receiveCount,
          firstSeenAt: entry.enqueuedAt,
          lastSeenAt: entry.lastReceivedAt,
          deadLetteredAt: now
        })
        return Effect.as(setDepth(dlq.size), true)
      })

    const pick = (ids: ReadonlyArray<string> | undefined): Array<DeadLetter<A>> =>
      ids === undefined
        ? [...dlq.values()]
        : ids.flatMap((id) => {
          const entry = dlq.get(id)
          return entry === undefined ? [] : [entry]
        })

    const deadLetters: DeadLetterQueue<A> = {
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
      inspect: (id) => Effect.sync(() => Option.fromNullable(dlq.get(id))),
      redrive: (ids) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) => {
          const moved = pick(ids)
          for (const entry of moved) {
            dlq.delete(entry.id)
            enqueue(entry.id, entry.key, entry.body, now)
          }
          return Effect.as(setDepth(dlq.size), moved.length)
        }),
      purge: (ids) =>
        Effect.suspend(() => {
          const gone = pick(ids)
          for (const entry of gone) dlq.delete(entry.id)
          return Effect.as(setDepth(dlq.size), gone.length)
        }),
      depth: Effect.suspend(() => setDepth(dlq.size))
    }

    return {
      name,
      visibilityTimeout: Duration.millis(visibility),
      send: (messages) =>
        Effect.map(Clock.currentTimeMillis, (now) => {
          for (const message of messages) enqueue(message.id, message.key, message.body, now)
        }),
      receive,
      ack: (message) =>
        Effect.sync(() => {
          // any receipt may delete: the handler of that delivery finished, so the work is done
          const [seq] = parseReceipt(message.receipt)
          return entries.delete(seq)
        }),
      release,
      deadLetter,
      deadLetters
    }
  })
}
