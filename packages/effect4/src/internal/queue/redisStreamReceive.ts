import { CHARGED, claimedState } from "@effect-resilience/core/crashAttribution"
import { Clock, Effect } from "effect"
import type { Message, ReceiveOptions } from "../../QueueSource.js"
import type { QueueError } from "./queueSource.js"
import { type Entry, fieldsOf, type RedisQueue } from "./redisStreamContext.js"
import { RECLAIM } from "./redisStreamScripts.js"
import { corruptReason, deadLetterCorrupt, tryParse } from "./shared.js"

interface Received {
  readonly entry: Entry
  /** The delivery count of the pending entries list (the receipt's fence). */
  readonly count: number
  /** Deliveries lost beside other handlers, given back (core/crashAttribution.ts). */
  readonly uncharged: number
  readonly suspect: boolean
  readonly lastError: string | null
}

/** One entry of `RECLAIM`'s answer: id, fields, delivery count, uncharged, suspect, error. */
type Reclaimed = [string, Array<string>, number, number, number, string | null]

const enqueuedAt = (entryId: string) => Number(entryId.slice(0, entryId.indexOf("-")))

/**
 * `receive` of one consumer: entries pending longer than the visibility timeout are taken over with
 * `XAUTOCLAIM` (at most every `reclaimInterval`, or at once after a release, and while a scan is under way), in
 * one script that judges the deliveries they end (`RECLAIM`), then new entries are read with `XREADGROUP`.
 * Entries whose body is not JSON go straight to the DLQ.
 */
export const makeReceive = <A>(
  q: RedisQueue,
  consumer: string,
  moveToDlq: (message: Message<A>, body: string, reason: string, now: number) => Effect.Effect<boolean, QueueError>
) => {
  const { deliveries, errors, stream } = q.keys
  const state = { cursor: "0-0", lastReclaimAt: -Infinity, released: false }

  const toMessages = (received: ReadonlyArray<Received>, now: number) => {
    const out: Array<Message<A>> = []
    const corrupt: Array<readonly [Message<A>, string, string]> = []
    for (const { count, entry, lastError, suspect, uncharged } of received) {
      const f = fieldsOf(entry[1])
      const body = f.body === undefined
        ? { ok: false as const, error: "the entry has no body field" }
        : tryParse(f.body)
      const message: Message<A> = {
        id: f.id ?? entry[0],
        key: f.key,
        body: (body.ok ? body.value : undefined) as A,
        receiveCount: Math.max(1, count - uncharged),
        suspect,
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

  const reclaim = (max: number, now: number, runsSuspectsAlone: boolean) =>
    Effect.gen(function*() {
      state.lastReclaimAt = now
      state.released = false
      const [next, claimed] = yield* q.runWith(
        "reclaim",
        RECLAIM,
        [stream, errors, deliveries],
        [q.group, consumer, String(q.visibility), state.cursor, String(max), String(claimedState(runsSuspectsAlone))],
        (reply) => reply as [string, Array<Reclaimed>]
      )
      state.cursor = next
      if (claimed.length === 0) return []
      return yield* toMessages(
        claimed.map(([id, fields, count, uncharged, suspect, lastError]) => ({
          entry: [id, fields] as Entry,
          count: Number(count),
          uncharged: Number(uncharged),
          suspect: Number(suspect) === 1,
          lastError: lastError ?? null
        })),
        now
      )
    })

  /**
   * New entries, at most `room` (`XREADGROUP` without `BLOCK`: the consumer polls). A new entry without a field
   * in `deliveries` is claimed by a consumer that runs suspects alone; a plain receive stores its own as charged
   * (a crash between the two calls gives that one loss back: the next claim stores it charged).
   */
  const readNew = (room: number, now: number, runsSuspectsAlone: boolean) =>
    Effect.flatMap(
      q.call<Array<[string, Array<Entry>]> | null>(
        "receive",
        () => q.client.call("XREADGROUP", "GROUP", q.group, consumer, "COUNT", room, "STREAMS", stream, ">")
      ),
      (read) => {
        const entries = read?.[0]?.[1] ?? []
        const messages = toMessages(
          entries.map((entry) => ({ entry, count: 1, uncharged: 0, suspect: false, lastError: null })),
          now
        )
        if (runsSuspectsAlone || entries.length === 0) return messages
        const charged = `${CHARGED},0,0`
        return Effect.andThen(
          q.call("receive", () => q.client.hset(deliveries, ...entries.flatMap(([id]) => [id, charged]))),
          messages
        )
      }
    )

  // the common case, no takeover due, is one call and no generator
  const receive = (max: number, options?: ReceiveOptions): Effect.Effect<Array<Message<A>>, QueueError> =>
    Effect.flatMap(Clock.currentTimeMillis, (now) => {
      const alone = options?.runsSuspectsAlone === true
      if (!due(now)) return readNew(max, now, alone)
      return Effect.flatMap(reclaim(max, now, alone), (reclaimed) => {
        const room = max - reclaimed.length
        if (room <= 0) return Effect.succeed(reclaimed)
        return Effect.map(
          readNew(room, now, alone),
          (fresh) => reclaimed.length === 0 ? fresh : [...reclaimed, ...fresh]
        )
      })
    })

  /** A release made an entry claimable: the next `receive` looks for it at once. */
  const noteRelease = () => void (state.released = true)
  return { receive, noteRelease }
}
