import { Effect, Metric, Option } from "effect"
import type { DeadLetter, DeadLetterQueue } from "../../DeadLetter.js"
import type { Message } from "../../QueueSource.js"
import type * as redisClient from "../redis/client.js"
import type { QueueError } from "./queueSource.js"
import { chunk, type Entry, fieldsOf, type RedisQueue } from "./redisStreamContext.js"
import { DEAD_LETTER, PURGE, PURGE_ENTRIES, REDRIVE, REDRIVE_ENTRIES } from "./redisStreamScripts.js"
import { listLimit, splitReceipt, tryParse } from "./shared.js"

const BATCH = 200

/** The DLQ stream's length, which also sets the gauge. */
export const redisDepth = (q: RedisQueue): Effect.Effect<number, QueueError> =>
  q.call<number>("depth", () => q.client.xlen(q.keys.dlq)).pipe(Effect.flatMap(q.setDepth))

/**
 * Moves a pending entry (fenced by consumer and delivery count) to the DLQ in one script, replacing an older
 * entry of the message. `false` when the receipt is stale.
 */
export const redisMoveToDlq = (q: RedisQueue, consumer: string) => {
  const { deliveries, dlq, errors, index, stream } = q.keys
  const depth = redisDepth(q)
  return <A>(message: Message<A>, body: string, reason: string, now: number): Effect.Effect<boolean, QueueError> => {
    const [entryId, count] = splitReceipt(message.receipt)
    const fields = [
      "id",
      message.id,
      ...(message.key === undefined ? [] : ["key", message.key]),
      "body",
      body,
      "reason",
      reason,
      "receiveCount",
      String(message.receiveCount),
      "firstSeenAt",
      String(message.enqueuedAt),
      "lastSeenAt",
      String(message.receivedAt),
      "deadLetteredAt",
      String(now)
    ]
    return q.run("deadLetter", DEAD_LETTER, [stream, dlq, index, errors, deliveries], [
      q.group,
      entryId,
      consumer,
      String(count),
      message.id,
      ...fields
    ]).pipe(Effect.flatMap((n) => n === 1 ? Effect.as(depth, true) : Effect.succeed(false)))
  }
}

const toDeadLetter = <A>(entry: Entry): DeadLetter<A> => {
  const f = fieldsOf(entry[1])
  // a body that is not JSON (dead-lettered as corrupt on receive) is listed as its raw text
  const raw = f.body ?? ""
  const parsed = tryParse(raw)
  return {
    id: f.id ?? entry[0],
    key: f.key,
    body: (parsed.ok ? parsed.value : raw) as A,
    reason: f.reason ?? "",
    receiveCount: Number(f.receiveCount ?? 0),
    firstSeenAt: Number(f.firstSeenAt ?? 0),
    lastSeenAt: Number(f.lastSeenAt ?? 0),
    deadLetteredAt: Number(f.deadLetteredAt ?? 0)
  }
}

/**
 * Runs `byId` over the given message ids; or, with no ids, `byEntry` over the entries the DLQ holds
 * now (up to its last entry id when the call starts, a page at a time), so entries dead-lettered
 * meanwhile (a redriven message failing again) are left for the next call instead of looping.
 */
const forIds = (
  q: RedisQueue,
  operation: string,
  scripts: { readonly byId: redisClient.Script; readonly byEntry: redisClient.Script },
  keys: ReadonlyArray<string>,
  ids?: ReadonlyArray<string>
) => {
  const dlqKey = q.keys.dlq
  const once = (script: redisClient.Script, batch: ReadonlyArray<string>) =>
    batch.length === 0 ? Effect.succeed(0) : q.run(operation, script, keys, batch)
  const all: Effect.Effect<number, QueueError> = Effect.gen(function*() {
    const last = yield* q.call<Array<Entry>>(operation, () => q.client.xrevrange(dlqKey, "+", "-", "COUNT", 1))
    const end = last[0]?.[0]
    if (end === undefined) return 0
    let total = 0
    let start = "-"
    for (;;) {
      const from = start
      const entries: Array<Entry> = yield* q.call<Array<Entry>>(
        operation,
        () => q.client.xrange(dlqKey, from, end, "COUNT", BATCH)
      )
      if (entries.length === 0) return total
      total += yield* once(scripts.byEntry, entries.map((e) => e[0]))
      const next: string = entries[entries.length - 1]![0]
      if (next === end || entries.length < BATCH) return total
      start = `(${next}`
    }
  })
  const work = ids === undefined
    ? all
    : Effect.reduce(
      chunk(ids, BATCH),
      () => 0,
      (total: number, batch) => Effect.map(once(scripts.byId, batch), (n) => total + n)
    )
  return Effect.tap(work, () => redisDepth(q))
}

export const redisDeadLetters = <A>(q: RedisQueue): DeadLetterQueue<A> => {
  const { dlq, index, stream } = q.keys
  return {
    list: (opts) =>
      Effect.suspend(() => q.call<Array<Entry>>("list", () => q.client.xrange(dlq, "-", "+", "COUNT", listLimit(opts))))
        .pipe(Effect.map((entries) => entries.map(toDeadLetter<A>))),
    inspect: (id) =>
      Effect.gen(function*() {
        const at = yield* q.call<string | null>("inspect", () => q.client.hget(index, id))
        if (at === null) return Option.none()
        const found = yield* q.call<Array<Entry>>("inspect", () => q.client.xrange(dlq, at, at))
        return Option.map(Option.fromNullishOr(found[0]), toDeadLetter<A>)
      }),
    redrive: (ids) =>
      Effect.tap(
        forIds(q, "redrive", { byId: REDRIVE, byEntry: REDRIVE_ENTRIES }, [stream, dlq, index], ids),
        (n) => Metric.update(q.tags.redriven, n)
      ),
    purge: (ids) => forIds(q, "purge", { byId: PURGE, byEntry: PURGE_ENTRIES }, [dlq, index], ids),
    depth: redisDepth(q)
  }
}
