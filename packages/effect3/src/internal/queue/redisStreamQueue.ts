import { Clock, Duration, Effect } from "effect"
import type { Message, QueueSource, ReleaseOptions } from "../../QueueSource.js"
import type { RedisOptions } from "../../RedisStreamQueue.js"
import * as redisClient from "../redis/client.js"
import { ackBatcher } from "./ackBatch.js"
import type { QueueError } from "./queueSource.js"
import { chunk, context, type RedisQueue } from "./redisStreamContext.js"
import { redisDeadLetters, redisMoveToDlq } from "./redisStreamDeadLetters.js"
import { makeReceive } from "./redisStreamReceive.js"
import { ACK, ACK_MANY, CREATE_GROUP, EXTEND, MARK_ALONE, RELEASE } from "./redisStreamScripts.js"
import { randomId, serialize, serializedPairs, splitReceipt, withAckMany } from "./shared.js"

export { type StreamKeys, streamKeys } from "./redisStreamKeys.js"

/** At most this many acks share one script call. */
const ACK_BATCH = 128

/**
 * Visibility is Redis's: a pending entry whose idle time (since its last delivery, by the server's clock)
 * reaches the visibility timeout is taken over by the next `XAUTOCLAIM`, which also bumps its delivery
 * count. A release rewinds the entry's idle time with `XCLAIM ... IDLE` so it is claimable after the delay;
 * an extension resets it to zero. Ack, extend, mark alone, release and dead-letter are scripts fenced by owner
 * and delivery count: a consumer whose entry was taken over (or claimed again) cannot touch the new delivery.
 * A takeover judges the delivery it ends (core/crashAttribution.ts; the hash `<stream>:deliveries`).
 */
export const make = <A>(options: RedisOptions): Effect.Effect<QueueSource<A>, QueueError> => {
  const q = context(options)
  return Effect.gen(function*() {
    const consumer = options.consumer ?? `consumer-${yield* randomId}`
    // a script, not XGROUP: ioredis cannot tell XGROUP's key, and would send it to any Cluster node
    yield* q.run("create group", CREATE_GROUP, [q.keys.stream], [q.group])
    return operations<A>(q, consumer)
  })
}

const operations = <A>(q: RedisQueue, consumer: string): QueueSource<A> => {
  const { deliveries, errors, stream } = q.keys
  const acked = [stream, errors, deliveries]
  const moveToDlq = redisMoveToDlq(q, consumer)
  const { noteRelease, receive } = makeReceive<A>(q, consumer, moveToDlq)
  /** A fenced script about one delivery: group, entry id, consumer, delivery count, then `extra`. */
  const fenced = (
    operation: string,
    script: redisClient.Script,
    keys: ReadonlyArray<string>,
    message: Message<A>,
    extra: ReadonlyArray<string> = []
  ) => {
    const [entryId, count] = splitReceipt(message.receipt)
    return q.run(operation, script, keys, [q.group, entryId, consumer, String(count), ...extra]).pipe(
      Effect.map((n) => n === 1)
    )
  }

  /** One script call for a group of acks, each fenced by its own receipt: which of them matched. */
  const ackGroup = (items: ReadonlyArray<readonly [string, string]>) =>
    Effect.map(
      q.runMany("ack", ACK_MANY, acked, [q.group, consumer, ...items.flat()]),
      (replies) => items.map((_, i) => replies[i] === 1)
    )
  // concurrent acks share one script call; a receipt that is not ours goes alone, so that its error is its own
  const ackShared = ackBatcher<readonly [string, string], QueueError>(ACK_BATCH, ackGroup)
  const ack = (message: Message<A>) => {
    const item = ackItem(message)
    return item !== undefined ? ackShared(item) : fenced("ack", ACK, acked, message)
  }
  // the consumer's own groups go straight to the script, without waiting behind one another
  const ackMany = (messages: ReadonlyArray<Message<A>>): Effect.Effect<ReadonlyArray<boolean>, QueueError> =>
    Effect.suspend(() => {
      const items = messages.map(ackItem)
      const valid = items.filter((item): item is readonly [string, string] => item !== undefined)
      // the consumer's group: all ours, one call
      if (valid.length === items.length && valid.length <= ACK_BATCH) {
        return valid.length === 0 ? Effect.succeed([]) : ackGroup(valid)
      }
      return Effect.flatMap(
        Effect.map(Effect.forEach(chunk(valid, ACK_BATCH), ackGroup), (answers) => answers.flat()),
        (answers) => {
          if (valid.length === items.length) return Effect.succeed(answers)
          let next = 0
          return Effect.forEach(
            messages,
            (message, i) =>
              items[i] === undefined ? fenced("ack", ACK, acked, message) : Effect.succeed(answers[next++]!)
          )
        }
      )
    })

  const release = (message: Message<A>, opts?: ReleaseOptions) => {
    // whole milliseconds, never shorter than asked
    const delay = opts?.delay === undefined ? 0 : Math.ceil(Duration.toMillis(opts.delay))
    const idle = Math.max(0, q.visibility - delay)
    return fenced("release", RELEASE, [stream, errors, deliveries], message, [
      String(idle),
      opts?.error ?? "",
      opts?.undoReceive === true ? "1" : "0"
    ]).pipe(Effect.map((done) => {
      if (done) noteRelease()
      return done
    }))
  }

  const deadLetter = (message: Message<A>, reason: string) =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const body = serialize(message.body)
      return body.ok ? moveToDlq(message, body.text, reason, now) : Effect.fail(q.fail("deadLetter")(body.error))
    })

  return withAckMany({
    name: q.name,
    visibilityTimeout: Duration.millis(q.visibility),
    send: (messages) => send(q, messages),
    receive,
    ack,
    extend: (message) => fenced("extend", EXTEND, [stream], message),
    markAlone: (message) => fenced("markAlone", MARK_ALONE, [stream, deliveries], message),
    release,
    deadLetter,
    deadLetters: redisDeadLetters<A>(q)
  }, ackMany)
}

/** A receipt the grouped script takes (entry id, delivery count), or `undefined`: not one of ours. */
const ackItem = (message: Message<unknown>): readonly [string, string] | undefined => {
  const [entryId, count] = splitReceipt(message.receipt)
  return /^\d{1,20}-\d{1,20}$/.test(entryId) && Number.isSafeInteger(count) ? [entryId, String(count)] : undefined
}

const send = <A>(
  q: RedisQueue,
  messages: ReadonlyArray<{ readonly id: string; readonly key?: string; readonly body: A }>
): Effect.Effect<void, QueueError> =>
  Effect.flatMap(serializedPairs(messages, q.fail("send")), (pairs) =>
    Effect.forEach(chunk(pairs, 1000), (batch) => {
      const writes: redisClient.Writes = (pipeline, asking) => {
        for (const [m, body] of batch) {
          const fields = m.key === undefined
            ? ["id", m.id, "body", body]
            : ["id", m.id, "key", m.key, "body", body]
          if (asking) pipeline.asking()
          pipeline.xadd(q.keys.stream, "*", ...fields)
        }
      }
      const exec = () => {
        if (q.wait !== undefined) return redisClient.execWithWait(q.client, writes, q.wait)
        const pipeline = q.client.pipeline()
        writes(pipeline, false)
        return pipeline.exec()
      }
      return q.call<ReadonlyArray<[Error | null, unknown]> | null>("send", exec).pipe(
        Effect.flatMap((replies) => {
          const error = replies?.find(([e]) => e !== null)?.[0]
          return error === undefined ? Effect.void : Effect.fail(q.fail("send")(error))
        })
      )
    }, { discard: true }))
