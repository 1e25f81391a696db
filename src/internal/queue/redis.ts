import { Clock, Duration, Effect, Option } from "effect"
import type { DeadLetter, DeadLetterQueue } from "../../queue/DeadLetter.js"
import { type Message, QueueError, type QueueSource, type ReleaseOptions } from "../../queue/QueueSource.js"
import type { RedisOptions } from "../../queue/RedisStreamQueue.js"
import * as validate from "../validate.js"
import { labels, observeDepth } from "./metrics.js"
import { listLimit, randomId, splitReceipt } from "./shared.js"

type Entry = [id: string, fields: Array<string>]

// Fencing: a release or dead-letter applies only while the entry is pending for this consumer with the
// delivery count of the receipt; XAUTOCLAIM by anyone (ourselves included) bumps the count.
const RELEASE = `
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] or tonumber(p[1][4]) ~= tonumber(ARGV[4]) then return 0 end
local count = tonumber(ARGV[4])
if ARGV[7] == '1' and count > 0 then count = count - 1 end
redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[3], 0, ARGV[2], 'IDLE', ARGV[5], 'RETRYCOUNT', count, 'JUSTID')
if ARGV[6] ~= '' then redis.call('HSET', KEYS[2], ARGV[2], ARGV[6]) end
return 1`

const DEAD_LETTER = `
local p = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1)
if #p == 0 or p[1][2] ~= ARGV[3] or tonumber(p[1][4]) ~= tonumber(ARGV[4]) then return 0 end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
redis.call('HDEL', KEYS[4], ARGV[2])
local old = redis.call('HGET', KEYS[3], ARGV[5])
if old then redis.call('XDEL', KEYS[2], old) end
local fields = {}
for i = 6, #ARGV do fields[#fields + 1] = ARGV[i] end
local added = redis.call('XADD', KEYS[2], '*', unpack(fields))
redis.call('HSET', KEYS[3], ARGV[5], added)
return 1`

const REDRIVE = `
local n = 0
for i = 1, #ARGV do
  local at = redis.call('HGET', KEYS[3], ARGV[i])
  if at then
    local found = redis.call('XRANGE', KEYS[2], at, at)
    if #found > 0 then
      local f = found[1][2]
      local out = {}
      for j = 1, #f, 2 do
        if f[j] == 'id' or f[j] == 'key' or f[j] == 'body' then
          out[#out + 1] = f[j]
          out[#out + 1] = f[j + 1]
        end
      end
      redis.call('XADD', KEYS[1], '*', unpack(out))
      n = n + 1
    end
    redis.call('XDEL', KEYS[2], at)
    redis.call('HDEL', KEYS[3], ARGV[i])
  end
end
return n`

const PURGE = `
local n = 0
for i = 1, #ARGV do
  local at = redis.call('HGET', KEYS[2], ARGV[i])
  if at then
    n = n + redis.call('XDEL', KEYS[1], at)
    redis.call('HDEL', KEYS[2], ARGV[i])
  end
end
return n`

const BATCH = 200

const fieldsOf = (list: ReadonlyArray<string>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (let i = 0; i + 1 < list.length; i += 2) out[list[i]!] = list[i + 1]!
  return out
}

const enqueuedAt = (entryId: string) => Number(entryId.slice(0, entryId.indexOf("-")))

/**
 * Visibility is Redis's: a pending entry whose idle time (since its last delivery, by the server's clock)
 * reaches the visibility timeout is taken over by the next `XAUTOCLAIM`, which also bumps its delivery
 * count. A release rewinds the entry's idle time with `XCLAIM ... IDLE` so it is claimable after the delay.
 */
export const make = <A>(options: RedisOptions): Effect.Effect<QueueSource<A>, QueueError> => {
  const visibility = validate.millis("RedisStreamQueue visibilityTimeout", options.visibilityTimeout, { finite: true })
  if (visibility < 1) validate.invalid("RedisStreamQueue visibilityTimeout must be at least 1 millisecond")
  const reclaimInterval = options.reclaimInterval === undefined
    ? Math.min(Math.max(1, Math.floor(visibility / 2)), 5_000)
    : validate.millis("RedisStreamQueue reclaimInterval", options.reclaimInterval, { finite: true })
  const { redis, stream } = options
  const group = options.group ?? "consumers"
  const name = options.name ?? stream
  const dlqKey = `${stream}:dlq`
  const indexKey = `${stream}:dlq:ids`
  const errorsKey = `${stream}:errors`
  const tags = labels(name)
  const setDepth = observeDepth(tags.base)
  const fail = (operation: string) => (cause: unknown) => new QueueError({ queue: name, operation, cause })
  const call = <T>(operation: string, f: () => Promise<unknown>) =>
    Effect.tryPromise({ try: () => f() as Promise<T>, catch: fail(operation) })

  return Effect.gen(function*() {
    const consumer = options.consumer ?? `consumer-${yield* randomId}`
    yield* call("create group", () => redis.call("XGROUP", "CREATE", stream, group, "0", "MKSTREAM")).pipe(
      Effect.catchIf((e) => String(e.cause).includes("BUSYGROUP"), () => Effect.void)
    )

    let cursor = "0-0"
    let lastReclaimAt = -Infinity
    let released = false

    const toMessage = (entry: Entry, receiveCount: number, lastError: string | null, now: number): Message<A> => {
      const f = fieldsOf(entry[1])
      return {
        id: f.id ?? entry[0],
        key: f.key,
        body: JSON.parse(f.body ?? "null") as A,
        receiveCount,
        enqueuedAt: enqueuedAt(entry[0]),
        receivedAt: now,
        lastError: lastError ?? undefined,
        receipt: `${entry[0]}:${receiveCount}`
      }
    }

    const reclaim = (max: number, now: number) =>
      Effect.gen(function*() {
        if (cursor === "0-0" && !released && now - lastReclaimAt < reclaimInterval) return []
        lastReclaimAt = now
        released = false
        const [next, claimed] = yield* call<[string, Array<Entry | null>]>(
          "reclaim",
          () => redis.call("XAUTOCLAIM", stream, group, consumer, visibility, cursor, "COUNT", max)
        )
        cursor = next
        const entries = claimed.filter((e): e is Entry => e !== null && Array.isArray(e[1]))
        if (entries.length === 0) return []
        // the delivery counts come from the pending entries list
        const pipeline = redis.pipeline()
        for (const [id] of entries) {
          pipeline.call("XPENDING", stream, group, id, id, 1)
          pipeline.hget(errorsKey, id)
        }
        const replies = yield* call<Array<[Error | null, unknown]>>("reclaim", () => pipeline.exec())
        return entries.map((entry, i) => {
          const pending = replies[2 * i]?.[1] as Array<[string, string, number, number]> | undefined
          const count = Number(pending?.[0]?.[3] ?? 2)
          return toMessage(entry, count, (replies[2 * i + 1]?.[1] as string | null) ?? null, now)
        })
      })

    const receive = (max: number) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const reclaimed = yield* reclaim(max, now)
        const room = max - reclaimed.length
        if (room <= 0) return reclaimed
        const read = yield* call<Array<[string, Array<Entry>]> | null>(
          "receive",
          () => redis.call("XREADGROUP", "GROUP", group, consumer, "COUNT", room, "STREAMS", stream, ">")
        )
        const fresh = (read?.[0]?.[1] ?? []).map((entry) => toMessage(entry, 1, null, now))
        return reclaimed.length === 0 ? fresh : [...reclaimed, ...fresh]
      })

    const ack = (message: Message<A>) => {
      const [entryId] = splitReceipt(message.receipt)
      return call<Array<[Error | null, unknown]>>(
        "ack",
        () => redis.multi().xack(stream, group, entryId).xdel(stream, entryId).hdel(errorsKey, entryId).exec()
      ).pipe(Effect.map((replies) => Number(replies?.[0]?.[1] ?? 0) > 0))
    }

    const release = (message: Message<A>, opts?: ReleaseOptions) => {
      const [entryId, count] = splitReceipt(message.receipt)
      const delay = opts?.delay === undefined ? 0 : Duration.toMillis(opts.delay)
      const idle = Math.max(0, Math.round(visibility - delay))
      return call<number>("release", () =>
        redis.eval(
          RELEASE,
          2,
          stream,
          errorsKey,
          group,
          entryId,
          consumer,
          count,
          idle,
          opts?.error ?? "",
          opts?.undoReceive === true ? "1" : "0"
        )).pipe(Effect.map((n) => {
          if (n !== 1) return false
          released = true
          return true
        }))
    }

    const depth = call<number>("depth", () => redis.xlen(dlqKey)).pipe(Effect.flatMap(setDepth))

    const deadLetter = (message: Message<A>, reason: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const [entryId, count] = splitReceipt(message.receipt)
        const fields = [
          "id",
          message.id,
          ...(message.key === undefined ? [] : ["key", message.key]),
          "body",
          JSON.stringify(message.body),
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
        return call<number>("deadLetter", () =>
          redis.eval(
            DEAD_LETTER,
            4,
            stream,
            dlqKey,
            indexKey,
            errorsKey,
            group,
            entryId,
            consumer,
            count,
            message.id,
            ...fields
          ))
      }).pipe(Effect.flatMap((n) => n === 1 ? Effect.as(depth, true) : Effect.succeed(false)))

    const toDeadLetter = (entry: Entry): DeadLetter<A> => {
      const f = fieldsOf(entry[1])
      return {
        id: f.id ?? entry[0],
        key: f.key,
        body: JSON.parse(f.body ?? "null") as A,
        reason: f.reason ?? "",
        receiveCount: Number(f.receiveCount ?? 0),
        firstSeenAt: Number(f.firstSeenAt ?? 0),
        lastSeenAt: Number(f.lastSeenAt ?? 0),
        deadLetteredAt: Number(f.deadLetteredAt ?? 0)
      }
    }

    /** Runs `script` over the given ids, or over every entry in batches. */
    const forIds = (operation: string, script: string, keys: ReadonlyArray<string>, ids?: ReadonlyArray<string>) => {
      const once = (batch: ReadonlyArray<string>) =>
        batch.length === 0
          ? Effect.succeed(0)
          : call<number>(operation, () => redis.eval(script, keys.length, ...keys, ...batch))
      const all: Effect.Effect<number, QueueError> = Effect.gen(function*() {
        let total = 0
        for (;;) {
          const entries = yield* call<Array<Entry>>(operation, () => redis.xrange(dlqKey, "-", "+", "COUNT", BATCH))
          if (entries.length === 0) return total
          total += yield* once(entries.map((e) => fieldsOf(e[1]).id ?? e[0]))
        }
      })
      const work = ids === undefined
        ? all
        : Effect.reduce(chunk(ids, BATCH), 0, (total, batch) => Effect.map(once(batch), (n) => total + n))
      return Effect.tap(work, () => depth)
    }

    const deadLetters: DeadLetterQueue<A> = {
      list: (opts) =>
        Effect.suspend(() => call<Array<Entry>>("list", () => redis.xrange(dlqKey, "-", "+", "COUNT", listLimit(opts))))
          .pipe(Effect.map((entries) => entries.map(toDeadLetter))),
      inspect: (id) =>
        Effect.gen(function*() {
          const at = yield* call<string | null>("inspect", () => redis.hget(indexKey, id))
          if (at === null) return Option.none()
          const found = yield* call<Array<Entry>>("inspect", () => redis.xrange(dlqKey, at, at))
          return Option.map(Option.fromNullable(found[0]), toDeadLetter)
        }),
      redrive: (ids) => forIds("redrive", REDRIVE, [stream, dlqKey, indexKey], ids),
      purge: (ids) => forIds("purge", PURGE, [dlqKey, indexKey], ids),
      depth
    }

    const send = (messages: ReadonlyArray<{ readonly id: string; readonly key?: string; readonly body: A }>) =>
      Effect.forEach(chunk(messages, 1000), (batch) => {
        const pipeline = redis.pipeline()
        for (const m of batch) {
          const fields = m.key === undefined
            ? ["id", m.id, "body", JSON.stringify(m.body)]
            : ["id", m.id, "key", m.key, "body", JSON.stringify(m.body)]
          pipeline.xadd(stream, "*", ...fields)
        }
        return call<Array<[Error | null, unknown]> | null>("send", () => pipeline.exec()).pipe(
          Effect.flatMap((replies) => {
            const error = replies?.find(([e]) => e !== null)?.[0]
            return error === undefined ? Effect.void : Effect.fail(fail("send")(error))
          })
        )
      }, { discard: true })

    const source: QueueSource<A> = {
      name,
      visibilityTimeout: Duration.millis(visibility),
      send,
      receive,
      ack,
      release,
      deadLetter,
      deadLetters
    }
    return source
  })
}

const chunk = <T>(items: ReadonlyArray<T>, size: number): Array<ReadonlyArray<T>> => {
  const out: Array<ReadonlyArray<T>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}
