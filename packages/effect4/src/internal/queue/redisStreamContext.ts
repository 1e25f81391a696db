import type { Effect } from "effect"
import type { RedisOptions } from "../../RedisStreamQueue.js"
import * as redisClient from "../redis/client.js"
import * as validate from "../validate.js"
import { labels, observeDepth } from "./metrics.js"
import { QueueError } from "./queueSource.js"
import { type StreamKeys, streamKeys } from "./redisStreamKeys.js"
import { visibilityMillis } from "./shared.js"

/** Longer than the stores' 2 s: a call may carry a batch (a page of redrives, 1000 sends). */
const DEFAULT_TIMEOUT_MILLIS = 5_000

export type Entry = [id: string, fields: Array<string>]

/** What every operation of one Redis stream queue shares: its options, validated, and its calls. */
export interface RedisQueue {
  readonly client: redisClient.Client
  readonly keys: StreamKeys
  readonly group: string
  readonly name: string
  readonly visibility: number
  readonly reclaimInterval: number
  readonly wait: redisClient.WaitReplicas | undefined
  readonly tags: ReturnType<typeof labels>
  readonly setDepth: (depth: number) => Effect.Effect<number>
  readonly fail: (operation: string) => (cause: unknown) => QueueError
  /** One call with the deadline (no command blocks: XREADGROUP is sent without BLOCK, the consumer polls). */
  readonly call: <T>(operation: string, f: () => Promise<unknown>) => Effect.Effect<T, QueueError>
  readonly run: (
    operation: string,
    script: redisClient.Script,
    keys: ReadonlyArray<string>,
    args: ReadonlyArray<string>
  ) => Effect.Effect<number, QueueError>
  /** As `run`, for a script whose answer `decode` reads. */
  readonly runWith: <T>(
    operation: string,
    script: redisClient.Script,
    keys: ReadonlyArray<string>,
    args: ReadonlyArray<string>,
    decode: (reply: unknown) => T
  ) => Effect.Effect<T, QueueError>
  /** As `run`, for a script that answers a list of numbers. */
  readonly runMany: (
    operation: string,
    script: redisClient.Script,
    keys: ReadonlyArray<string>,
    args: ReadonlyArray<string>
  ) => Effect.Effect<ReadonlyArray<number>, QueueError>
}

export const context = (options: RedisOptions): RedisQueue => {
  const visibility = visibilityMillis("RedisStreamQueue", options.visibilityTimeout)
  const reclaimInterval = options.reclaimInterval === undefined
    ? Math.min(Math.max(1, Math.floor(visibility / 2)), 5_000)
    : validate.millis("RedisStreamQueue reclaimInterval", options.reclaimInterval, { finite: true })
  const client = options.redis
  const keys = streamKeys(options.stream, client.isCluster === true)
  const name = options.name ?? keys.stream
  const tags = labels(name)
  const fail = (operation: string) => (cause: unknown) => new QueueError({ queue: name, operation, cause })
  const timeout = options.timeout === undefined
    ? DEFAULT_TIMEOUT_MILLIS
    : validate.millis("RedisStreamQueue timeout", options.timeout, { finite: true })
  if (timeout <= 0) validate.invalid("RedisStreamQueue timeout must be longer than zero")
  return {
    client,
    keys,
    group: options.group ?? "consumers",
    name,
    visibility,
    reclaimInterval,
    wait: redisClient.resolveWaitReplicas("RedisStreamQueue", options.waitReplicas, timeout),
    tags,
    setDepth: observeDepth(tags.depth),
    fail,
    call: <T>(operation: string, f: () => Promise<unknown>) =>
      redisClient.call(f, timeout, (reply) => reply as T, fail(operation)),
    run: (operation, s, scriptKeys, args) =>
      redisClient.runScript(client, s, scriptKeys, args, false, timeout, Number, fail(operation)),
    runWith: (operation, s, scriptKeys, args, decode) =>
      redisClient.runScript(client, s, scriptKeys, args, false, timeout, decode, fail(operation)),
    runMany: (operation, s, scriptKeys, args) =>
      redisClient.runScript(client, s, scriptKeys, args, false, timeout, numbers, fail(operation))
  }
}

/** A script's list of answers; anything else is the script's failure, not a list of "not acked". */
const numbers = (reply: unknown): ReadonlyArray<number> => {
  if (!Array.isArray(reply)) throw new Error(`unexpected script reply: ${String(reply)}`)
  return reply.map(Number)
}

export const fieldsOf = (list: ReadonlyArray<string>): Record<string, string> => {
  const out: Record<string, string> = {}
  for (let i = 0; i + 1 < list.length; i += 2) out[list[i]!] = list[i + 1]!
  return out
}

export const chunk = <T>(items: ReadonlyArray<T>, size: number): Array<ReadonlyArray<T>> => {
  const out: Array<ReadonlyArray<T>> = []
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size))
  return out
}
