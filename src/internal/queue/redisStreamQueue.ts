import { Clock, Duration, Effect, Option } from "effect"
import type { DeadLetter, DeadLetterQueue } from "../../DeadLetter.js"
import type { Message, QueueSource, ReleaseOptions } from "../../QueueSource.js"
import type { RedisOptions } from "../../RedisStreamQueue.js"
import * as redisClient from "../redis/client.js"
import { hashTagOf } from "../redis/options.js"
import * as validate from "../validate.js"
import { labels, observeDepth } from "./metrics.js"
import { QueueError } from "./queueSource.js"
import {
  CREATE_GROUP,
  DEAD_LETTER,
  PURGE,
  PURGE_ENTRIES,
  REDRIVE,
  REDRIVE_ENTRIES,
  RELEASE
} from "./redisStreamScripts.js"
import {
  corruptReason,
  deadLetterCorrupt,
  listLimit,
  randomId,
  serialize,
  serializedPairs,
  splitReceipt,
  tryParse,
  visibilityMillis
} from "./shared.js"

type Entry = [id: string, fields: Array<string>]

const BATCH = 200

/** Longer than the stores' 2 s: a call may carry a batch (a page of redrives, 1000 sends). */
const DEFAULT_TIMEOUT_MILLIS = 5_000

const fieldsOf = (list: ReadonlyArray<string>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (let i = 0; i + 1 < list.length; i += 2) out[list[i]!] = list[i + 1]!
  return out
}

const enqueuedAt = (entryId: string) => Number(entryId.slice(0, entryId.indexOf("-")))

/** The keys of one queue: the stream, its dead-letter stream, the DLQ's index by message id, the release errors. */
export interface StreamKeys {
  readonly stream: string
  readonly dlq: string
  readonly index: string
  readonly errors: string
}

/**
 * The keys of the queue on `stream`. The scripts touch several of them in one call, so on a Redis Cluster
 * they must share the stream's slot. On one node they are `<stream>:dlq`, `<stream>:dlq:ids` and
 * `<stream>:errors`, as they always were; so they are on a Cluster when the stream has a hash tag
 * (`{orders}` → `{orders}:dlq`: one slot). A stream without one is hashed whole, which is exactly what the
 * tag `{<stream>}` hashes: on a Cluster its keys are `{<stream>}:dlq`, … — one slot by construction. A name
 * with no tag but a `}` cannot be put in a tag (a tag ends at the first `}`): rejected on a Cluster.
 */
export const streamKeys = (stream: string, cluster: boolean): StreamKeys => {
  if (typeof stream !== "string" || stream.length === 0) {
    validate.invalid(`RedisStreamQueue stream must be a non-empty string, got ${JSON.stringify(stream)}`)
  }
  let base = stream
  if (cluster && hashTagOf(stream) === undefined) {
    if (stream.includes("}")) {
      validate.invalid(
        `RedisStreamQueue stream ${JSON.stringify(stream)} has no hash tag and contains "}", so on a Redis ` +
          `Cluster its derived keys cannot share its slot: put a hash tag in the name, e.g. "{orders}"`
      )
    }
    base = `{${stream}}`
  }
  return { stream, dlq: `${base}:dlq`, index: `${base}:dlq:ids`, errors: `${base}:errors` }
}

/**
 * Visibility is Redis's: a pending entry whose idle time (since its last delivery, by the server's clock)
 * reaches the visibility timeout is taken over by the next `XAUTOCLAIM`, which also bumps its delivery
 * count. A release rewinds the entry's idle time with `XCLAIM ... IDLE` so it is claimable after the delay.
 */
export const make = <A>(options: RedisOptions): Effect.Effect<QueueSource<A>, QueueError> => {
  const visibility = visibilityMillis("RedisStreamQueue", options.visibilityTimeout)
  const reclaimInterval = options.reclaimInterval === undefined
    ? Math.min(Math.max(1, Math.floor(visibility / 2)), 5_000)
    : validate.millis("RedisStreamQueue reclaimInterval", options.reclaimInterval, { finite: true })
  const client = options.redis
  const { dlq: dlqKey, errors: errorsKey, index: indexKey, stream } = streamKeys(
    options.stream,
    client.isCluster === true
  )
  const group = options.group ?? "consumers"
  const name = options.name ?? stream
  const tags = labels(name)
  const setDepth = observeDepth(tags.base)
  const fail = (operation: string) => (cause: unknown) => new QueueError({ queue: name, operation, cause })
  const timeout = options.timeout === undefined
    ? DEFAULT_TIMEOUT_MILLIS
    : validate.millis("RedisStreamQueue timeout", options.timeout, { finite: true })
  if (timeout <= 0) validate.invalid("RedisStreamQueue timeout must be longer than zero")
  const wait = redisClient.resolveWaitReplicas("RedisStreamQueue", options.waitReplicas, timeout)
  // every call has the deadline (no command blocks: XREADGROUP is sent without BLOCK, the consumer polls)
  const call = <T>(operation: string, f: () => Promise<unknown>) =>
    redisClient.call(f, timeout, (reply) => reply as T, fail(operation))
  const run = (operation: string, s: redisClient.Script, keys: ReadonlyArray<string>, args: ReadonlyArray<string>) =>
    redisClient.runScript(client, s, keys, args, false, timeout, Number, fail(operation))

  return Effect.gen(function*() {
    const consumer = options.consumer ?? `consumer-${yield* randomId}`
    // a script, not XGROUP: ioredis cannot tell XGROUP's key, and would send it to any Cluster node
    yield* run("create group", CREATE_GROUP, [stream], [group])

    let cursor = "0-0"
    let lastReclaimAt = -Infinity
    let released = false

    /** Entries whose body is not JSON go straight to the DLQ (raw text kept); the others become messages. */
    const toMessages = (
      received: ReadonlyArray<{ readonly entry: Entry; readonly count: number; readonly lastError: string | null }>,
      now: number
    ) => {
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
          name,
          corrupt,
          ([message]) => message.id,
          ([message, raw, reason]) => moveToDlq(message, raw, reason, now),
          tags.corrupt
        ),
        out
      )
    }

    const reclaim = (max: number, now: number) =>
      Effect.gen(function*() {
        if (cursor === "0-0" && !released && now - lastReclaimAt < reclaimInterval) return []
        lastReclaimAt = now
        released = false
        const [next, claimed] = yield* call<[string, Array<Entry | null>]>(
          "reclaim",
          () => client.call("XAUTOCLAIM", stream, group, consumer, visibility, cursor, "COUNT", max)
        )
        cursor = next
        const entries = claimed.filter((e): e is Entry => e !== null && Array.isArray(e[1]))
        if (entries.length === 0) return []
        // the delivery counts come from the pending entries list
        const pipeline = client.pipeline()
        for (const [id] of entries) {
          pipeline.call("XPENDING", stream, group, id, id, 1)
          pipeline.hget(errorsKey, id)
        }
        const replies = yield* call<Array<[Error | null, unknown]>>("reclaim", () => pipeline.exec())
        return yield* toMessages(
          entries.map((entry, i) => {
            const pending = replies[2 * i]?.[1] as Array<[string, string, number, number]> | undefined
            const count = Number(pending?.[0]?.[3] ?? 2)
            return { entry, count, lastError: (replies[2 * i + 1]?.[1] as string | null) ?? null }
          }),
          now
        )
      })

    const receive = (max: number) =>
      Effect.gen(function*() {
        const now = yield* Clock.currentTimeMillis
        const reclaimed = yield* reclaim(max, now)
        const room = max - reclaimed.length
        if (room <= 0) return reclaimed
        const read = yield* call<Array<[string, Array<Entry>]> | null>(
          "receive",
          () => client.call("XREADGROUP", "GROUP", group, consumer, "COUNT", room, "STREAMS", stream, ">")
        )
        const fresh = yield* toMessages(
          (read?.[0]?.[1] ?? []).map((entry) => ({ entry, count: 1, lastError: null })),
          now
        )
        return reclaimed.length === 0 ? fresh : [...reclaimed, ...fresh]
      })

    const ack = (message: Message<A>) => {
      const [entryId] = splitReceipt(message.receipt)
      return call<Array<[Error | null, unknown]>>(
        "ack",
        () => client.multi().xack(stream, group, entryId).xdel(stream, entryId).hdel(errorsKey, entryId).exec()
      ).pipe(Effect.map((replies) => Number(replies?.[0]?.[1] ?? 0) > 0))
    }

    const release = (message: Message<A>, opts?: ReleaseOptions) => {
      const [entryId, count] = splitReceipt(message.receipt)
      // whole milliseconds, never shorter than asked
      const delay = opts?.delay === undefined ? 0 : Math.ceil(Duration.toMillis(opts.delay))
      const idle = Math.max(0, visibility - delay)
      return run("release", RELEASE, [stream, errorsKey], [
        group,
        entryId,
        consumer,
        String(count),
        String(idle),
        opts?.error ?? "",
        opts?.undoReceive === true ? "1" : "0"
      ]).pipe(Effect.map((n) => {
        if (n !== 1) return false
        released = true
        return true
      }))
    }

    const depth = call<number>("depth", () => client.xlen(dlqKey)).pipe(Effect.flatMap(setDepth))

    /** Moves a pending entry (fenced by consumer and delivery count) to the DLQ, replacing an older entry. */
    const moveToDlq = (message: Message<A>, body: string, reason: string, now: number) => {
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
      return run("deadLetter", DEAD_LETTER, [stream, dlqKey, indexKey, errorsKey], [
        group,
        entryId,
        consumer,
        String(count),
        message.id,
        ...fields
      ]).pipe(Effect.flatMap((n) => n === 1 ? Effect.as(depth, true) : Effect.succeed(false)))
    }

    const deadLetter = (message: Message<A>, reason: string) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => {
        const body = serialize(message.body)
        return body.ok ? moveToDlq(message, body.text, reason, now) : Effect.fail(fail("deadLetter")(body.error))
      })

    const toDeadLetter = (entry: Entry): DeadLetter<A> => {
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
      operation: string,
      scripts: { readonly byId: redisClient.Script; readonly byEntry: redisClient.Script },
      keys: ReadonlyArray<string>,
      ids?: ReadonlyArray<string>
    ) => {
      const once = (script: redisClient.Script, batch: ReadonlyArray<string>) =>
        batch.length === 0 ? Effect.succeed(0) : run(operation, script, keys, batch)
      const all: Effect.Effect<number, QueueError> = Effect.gen(function*() {
        const last = yield* call<Array<Entry>>(operation, () => client.xrevrange(dlqKey, "+", "-", "COUNT", 1))
        const end = last[0]?.[0]
        if (end === undefined) return 0
        let total = 0
        let start = "-"
        for (;;) {
          const from = start
          const entries: Array<Entry> = yield* call<Array<Entry>>(
            operation,
            () => client.xrange(dlqKey, from, end, "COUNT", BATCH)
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
        : Effect.reduce(chunk(ids, BATCH), 0, (total, batch) => Effect.map(once(scripts.byId, batch), (n) => total + n))
      return Effect.tap(work, () => depth)
    }

    const deadLetters: DeadLetterQueue<A> = {
      list: (opts) =>
        Effect.suspend(() =>
          call<Array<Entry>>("list", () => client.xrange(dlqKey, "-", "+", "COUNT", listLimit(opts)))
        )
          .pipe(Effect.map((entries) => entries.map(toDeadLetter))),
      inspect: (id) =>
        Effect.gen(function*() {
          const at = yield* call<string | null>("inspect", () => client.hget(indexKey, id))
          if (at === null) return Option.none()
          const found = yield* call<Array<Entry>>("inspect", () => client.xrange(dlqKey, at, at))
          return Option.map(Option.fromNullable(found[0]), toDeadLetter)
        }),
      redrive: (ids) => forIds("redrive", { byId: REDRIVE, byEntry: REDRIVE_ENTRIES }, [stream, dlqKey, indexKey], ids),
      purge: (ids) => forIds("purge", { byId: PURGE, byEntry: PURGE_ENTRIES }, [dlqKey, indexKey], ids),
      depth
    }

    const send = (messages: ReadonlyArray<{ readonly id: string; readonly key?: string; readonly body: A }>) =>
      Effect.flatMap(serializedPairs(messages, fail("send")), (pairs) =>
        Effect.forEach(chunk(pairs, 1000), (batch) => {
          const writes: redisClient.Writes = (pipeline, asking) => {
            for (const [m, body] of batch) {
              const fields = m.key === undefined
                ? ["id", m.id, "body", body]
                : ["id", m.id, "key", m.key, "body", body]
              if (asking) pipeline.asking()
              pipeline.xadd(stream, "*", ...fields)
            }
          }
          const exec = () => {
            if (wait !== undefined) return redisClient.execWithWait(client, writes, wait)
            const pipeline = client.pipeline()
            writes(pipeline, false)
            return pipeline.exec()
          }
          return call<ReadonlyArray<[Error | null, unknown]> | null>("send", exec).pipe(
            Effect.flatMap((replies) => {
              const error = replies?.find(([e]) => e !== null)?.[0]
              return error === undefined ? Effect.void : Effect.fail(fail("send")(error))
            })
          )
        }, { discard: true }))

    const visibilityTimeout = Duration.millis(visibility)
    const source: QueueSource<A> = { name, visibilityTimeout, send, receive, ack, release, deadLetter, deadLetters }
    return source
  })
}

const chunk = <T>(items: ReadonlyArray<T>, size: number): Array<ReadonlyArray<T>> => {
  const out: Array<ReadonlyArray<T>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}
