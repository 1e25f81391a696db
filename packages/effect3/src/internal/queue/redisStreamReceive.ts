import { Clock, Effect } from "effect"
import type { Message } from "../../QueueSource.js"
import type { QueueError } from "./queueSource.js"
import { type Entry, fieldsOf, type RedisQueue } from "./redisStreamContext.js"
import { corruptReason, deadLetterCorrupt, tryParse } from "./shared.js"

interface Received {
  readonly entry: Entry
  readonly count: number
  readonly lastError: string | null
}

const enqueuedAt = (entryId: string) => Number(entryId.slice(0, entryId.indexOf("-")))

/**
 * `receive` of one consumer: entries pending longer than the visibility timeout are taken over with
 * `XAUTOCLAIM` (at most every `reclaimInterval`, or at once after a release, and while a scan is under way),
 * then new entries are read with `XREADGROUP`. Entries whose body is not JSON go straight to the DLQ.
 */
export const makeReceive = <A>(
  q: RedisQueue,
  consumer: string,
  moveToDlq: (message: Message<A>, body: string, reason: string, now: number) => Effect.Effect<boolean, QueueError>
) => {
  const { errors, stream } = q.keys
  const state = { cursor: "0-0", lastReclaimAt: -Infinity, released: false }

  const toMessages = (received: ReadonlyArray<Received>, now: number) => {
    const out: Array<Message<A>> = []
    const corrupt: Array<readonly [Message<A>, string, string]> = []
    for (const { count, entry, lastError } of received) {
      const f = fieldsOf(entry[1])
      const body = f.body === undefined
        ? { ok: false as const, error: "the entry has no body field" }
        : tryParse(f.body)
      const message: Message<A> = {
        id: f.id ?? entry[0],
        key: f.key,
        body: (body.ok ? body.value : undefined) as A,
        receiveCount: count,
        enqueuedAt: enqueuedAt(entry[0]),
        receivedAt: now,
        lastError: lastError ?? undefined,
        receipt: `${entry[0]}:${count}`
      }
      if (body.ok) out.push(message)
      else corrupt.push([message, f.body ?? "", corruptReason(body.error)])
    }
    if (corrupt.length === 0) return Effect.succeed(out)
    // if dead-lettering fails the entry stays pending, comes back by XAUTOCLAIM and is tried again
    return Effect.as(
      deadLetterCorrupt(
        q.name,
        corrupt,
        ([message]) => message.id,
        ([message, raw, reason]) => moveToDlq(message, raw, reason, now),
        q.tags.corrupt
      ),
      out
    )
  }

  const due = (now: number) =>
    state.cursor !== "0-0" || state.released || now - state.lastReclaimAt >= q.reclaimInterval

  const reclaim = (max: number, now: number) =>
    Effect.gen(function*() {
      state.lastReclaimAt = now
      state.released = false
      const [next, claimed] = yield* q.call<[string, Array<Entry | null>]>(
        "reclaim",
        () => q.client.call("XAUTOCLAIM", stream, q.group, consumer, q.visibility, state.cursor, "COUNT", max)
      )
      state.cursor = next
      const entries = claimed.filter((e): e is Entry => e !== null && Array.isArray(e[1]))
      if (entries.length === 0) return []
      // the delivery counts come from the pending entries list
      const pipeline = q.client.pipeline()
      for (const [id] of entries) {
        pipeline.call("XPENDING", stream, q.group, id, id, 1)
        pipeline.hget(errors, id)
      }
      const replies = yield* q.call<Array<[Error | null, unknown]>>("reclaim", () => pipeline.exec())
      return yield* toMessages(
        entries.map((entry, i) => {
          const pending = replies[2 * i]?.[1] as Array<[string, string, number, number]> | undefined
          const count = Number(pending?.[0]?.[3] ?? 2)
          return { entry, count, lastError: (replies[2 * i + 1]?.[1] as string | null) ?? null }
        }),
        now
      )
    })

  /** New entries, at most `room` (`XREADGROUP` without `BLOCK`: the consumer polls). */
  const readNew = (room: number, now: number) =>
    Effect.flatMap(
      q.call<Array<[string, Array<Entry>]> | null>(
        "receive",
        () => q.client.call("XREADGROUP", "GROUP", q.group, consumer, "COUNT", room, "STREAMS", stream, ">")
      ),
      (read) => toMessages((read?.[0]?.[1] ?? []).map((entry) => ({ entry, count: 1, lastError: null })), now)
    )

  // the common case, no takeover due, is one call and no generator
  const receive = (max: number): Effect.Effect<Array<Message<A>>, QueueError> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      if (!due(now)) return readNew(max, now)
      return Effect.flatMap(reclaim(max, now), (reclaimed) => {
        const room = max - reclaimed.length
        if (room <= 0) return Effect.succeed(reclaimed)
        return Effect.map(readNew(room, now), (fresh) => reclaimed.length === 0 ? fresh : [...reclaimed, ...fresh])
      })
    })

  /** A release made an entry claimable: the next `receive` looks for it at once. */
  const noteRelease = () => void (state.released = true)
  return { receive, noteRelease }
}
