/**
 * The one Redis adapter of the library, used by every Redis backend (the idempotency and rate-limit
 * stores, later the stream queue): getting a client (the caller's, or one the layer owns), running Lua
 * scripts as `EVALSHA` with a reload on `NOSCRIPT`, `WAIT` for replicas, and a real-time deadline on every
 * call (`request.ts`). (The Effect 3 edition's copy also has the pub/sub listener of the fleet breaker; it comes
 * with it.)
 *
 * Imported only by the Redis backend entry points, so the package root does not load `ioredis`.
 */
import { beforeWrite } from "@effect-resilience/core/writeCoalescing"
import { Effect } from "effect"
import type { Duration, Scope } from "effect"
import { Cluster, Redis } from "ioredis"
import { createHash } from "node:crypto"
import * as validate from "../validate.js"
import type { Connection } from "./options.js"

export type Client = Redis | Cluster

export type ClientOptions = Connection

/**
 * The caller's client as it is (never closed here), or a new client for `url` (one node) or `cluster`
 * (startup nodes of a Redis Cluster) that is closed with the scope. A client made here fails fast while
 * Redis is down instead of queueing commands for a long reconnect (one retry per command); every call has
 * its own deadline anyway (`request`). With `autoPipelining`, a client made here batches the commands sent
 * in one tick of the event loop into one write (ioredis' `enableAutoPipelining`; the caller's options win):
 * a backend whose calls come from many requests at once then costs Redis, and the process, one write and
 * one wake-up per batch instead of one per call.
 */
export const acquire = (
  options: ClientOptions,
  defaults: { readonly autoPipelining?: boolean } = {}
): Effect.Effect<Client, never, Scope.Scope> => {
  const autoPipelining = defaults.autoPipelining === true ? { enableAutoPipelining: true } : {}
  if ("client" in options) return Effect.succeed(options.client)
  return Effect.acquireRelease(
    Effect.sync(() => {
      const client: Client = "cluster" in options
        ? new Cluster([...options.cluster], {
          ...autoPipelining,
          ...options.clusterOptions,
          redisOptions: { maxRetriesPerRequest: 1, ...options.clusterOptions?.redisOptions }
        })
        : new Redis(options.url, {
          maxRetriesPerRequest: 1,
          ...autoPipelining,
          ...options.redisOptions
        })
      // connection errors surface through the commands that fail; without a listener ioredis prints each one
      client.on("error", () => {})
      return client
    }),
    (client) =>
      Effect.promise(() =>
        Promise.race([
          client.quit().catch(() => undefined),
          // a real deadline for a network goodbye (see `request`)
          // eslint-disable-next-line no-restricted-globals
          new Promise((resolve) => setTimeout(resolve, 1000).unref())
        ]).finally(() => client.disconnect())
      )
  )
}

/** A script with its SHA-1, for `EVALSHA`. */
export interface Script {
  readonly lua: string
  readonly sha: string
}

export const script = (lua: string): Script => ({ lua, sha: createHash("sha1").update(lua).digest("hex") })

const isNoScript = (error: unknown): boolean => error instanceof Error && error.message.startsWith("NOSCRIPT")

import { Call, request } from "./request.js"

export { Call, type Deadlines, deadlinesFor, RedisTimeout, request, requestOr } from "./request.js"

// ioredis types `evalsha` per class; Redis and Cluster share the implementation
type Args = ReadonlyArray<string | Buffer>
interface Eval {
  evalsha(sha: string, numKeys: number, ...args: Args): Promise<unknown>
  eval(lua: string, numKeys: number, ...args: Args): Promise<unknown>
  evalshaBuffer(sha: string, numKeys: number, ...args: Args): Promise<unknown>
  evalBuffer(lua: string, numKeys: number, ...args: Args): Promise<unknown>
}

/** `WAIT <replicas> <timeoutMillis>` after a write: how many replicas must have it before it counts as done. */
export interface WaitReplicas {
  readonly replicas: number
  readonly timeoutMillis: number
}

/** The option as users give it (`waitReplicas` of the idempotency store and the stream queue). */
export interface WaitReplicasOption {
  readonly replicas: number
  readonly timeout: Duration.Input
}

/**
 * Checks `waitReplicas`: at least one replica, and a timeout longer than zero (`WAIT … 0` would block for
 * ever) and shorter than the call's own deadline (or every WAIT that runs out would end as a timeout instead).
 */
export const resolveWaitReplicas = (
  what: string,
  option: WaitReplicasOption | undefined,
  callTimeoutMillis: number
): WaitReplicas | undefined => {
  if (option === undefined) return undefined
  if (typeof option !== "object" || option === null) validate.invalid(`${what} waitReplicas must be an object`)
  const replicas = validate.positiveInt(`${what} waitReplicas.replicas`, option.replicas)
  const timeoutMillis = Math.ceil(validate.millis(`${what} waitReplicas.timeout`, option.timeout, { finite: true }))
  if (timeoutMillis <= 0 || timeoutMillis >= callTimeoutMillis) {
    validate.invalid(
      `${what} waitReplicas.timeout must be longer than zero and shorter than the timeout (${callTimeoutMillis} ms), ` +
        `got ${timeoutMillis} ms`
    )
  }
  return { replicas, timeoutMillis }
}

/** Why a write that Redis executed is reported failed: fewer replicas than asked acknowledged it in time. */
export class NotReplicated extends Error {
  constructor(readonly acknowledged: number, readonly wanted: WaitReplicas) {
    super(
      `Redis executed the write but ${acknowledged} of the ${wanted.replicas} replicas asked for acknowledged ` +
        `it within ${wanted.timeoutMillis} ms (WAIT): a failover now may lose it`
    )
    this.name = "NotReplicated"
  }
}

/** Fills a pipeline with the write(s) `WAIT` confirms; `asking` when sent to a slot's importing node (`ASK`). */
export type Writes = (pipeline: ReturnType<Client["pipeline"]>, asking: boolean) => void

/** Redirections followed per call, as ioredis' own `maxRedirections` default. */
const maxRedirections = 16

/**
 * Sends the writes and `WAIT` in one pipeline, and turns the replies into the writes' replies (the `WAIT`
 * reply removed): the first error, or `NotReplicated` when too few replicas acknowledged them. `WAIT` has no
 * key: in the writes' pipeline it goes to the node their key routes to, on the same connection, right after
 * them. ioredis follows a pipeline's redirection only when its other commands are read-only, which `WAIT` is
 * not, so a Cluster's `MOVED` and `ASK` are followed here: the pipeline goes again to the node the error names
 * (after `ASKING` for `ASK`), and `MOVED` also refreshes the client's map of the slots.
 */
export const execWithWait = (
  client: Client,
  writes: Writes,
  wait: WaitReplicas
): Promise<ReadonlyArray<[Error | null, unknown]>> => {
  const attempt = (target: Client, asking: boolean, left: number): Promise<ReadonlyArray<[Error | null, unknown]>> => {
    const pipeline = target.pipeline()
    writes(pipeline, asking)
    return pipeline.call("WAIT", wait.replicas, wait.timeoutMillis).exec().then((replies) => {
      if (replies === null) throw new Error("the pipeline was discarded")
      const [waitError, acknowledged] = replies[replies.length - 1]!
      const failed = replies.find(([e]) => e !== null)?.[0] ?? null
      if (failed !== null && failed !== waitError) {
        const redirect = /^(MOVED|ASK) \d+ (.+):(\d+)$/.exec(failed.message)
        // `isCluster`, not `instanceof`: the caller's client may come from another copy of ioredis than this package's
        const cluster = client.isCluster ? client as Cluster : undefined
        const to = redirect === null ? undefined : `${redirect[2]}:${redirect[3]}`
        if (redirect?.[1] === "MOVED") cluster?.refreshSlotsCache()
        const node = left === 0 || to === undefined
          ? undefined
          : cluster?.nodes("all").find((n) => `${n.options.host}:${n.options.port}` === to)
        if (node === undefined) throw failed
        return attempt(node, redirect![1] === "ASK", left - 1)
      }
      if (waitError !== null) throw waitError
      if (Number(acknowledged) < wait.replicas) throw new NotReplicated(Number(acknowledged), wait)
      return replies.slice(0, -1)
    })
  }
  return attempt(client, false, maxRedirections)
}

/**
 * Runs a script as an effect: `EVALSHA`, and on `NOSCRIPT` (a restarted server, a new Cluster node,
 * `SCRIPT FLUSH`) `EVAL`, which also caches the script for the next `EVALSHA`. With `buffers`, bulk
 * replies are `Buffer`s. On a Cluster, `keys` must share a hash slot (a common hash tag). With `wait`, the
 * script is followed by `WAIT` in one pipeline, and the call fails with `NotReplicated` when too few
 * replicas acknowledged it. Without `wait`, its write is coalesced with those of the calls sent in the same tick
 * ({@link coalesceWrites}).
 */
export const runScript = <A, E>(
  client: Client,
  s: Script,
  keys: ReadonlyArray<string>,
  args: Args,
  buffers: boolean,
  timeoutMillis: number,
  decode: (reply: unknown) => A,
  onError: (cause: unknown) => E,
  wait?: WaitReplicas
): Effect.Effect<A, E> => {
  const c = client as unknown as Eval
  const n = keys.length
  const evalsha = (target: Eval) =>
    buffers ? target.evalshaBuffer(s.sha, n, ...keys, ...args) : target.evalsha(s.sha, n, ...keys, ...args)
  const evalLua = (target: Eval) =>
    buffers ? target.evalBuffer(s.lua, n, ...keys, ...args) : target.eval(s.lua, n, ...keys, ...args)
  const replicated = (command: (target: Eval) => unknown) => () =>
    execWithWait(client, (pipeline, asking) => {
      if (asking) pipeline.asking()
      command(pipeline as unknown as Eval)
    }, wait!).then((replies) => replies[replies.length - 1]![1])
  return request(
    wait === undefined
      ? () => {
        coalesceWrites(client)
        return evalsha(c)
      }
      : replicated(evalsha),
    (error) => isNoScript(error) ? (wait === undefined ? evalLua(c) : replicated(evalLua)()) : undefined,
    timeoutMillis,
    decode,
    onError
  )
}

/**
 * Coalesces the writes of one tick on a single-node client (`core/writeCoalescing.ts`): calls sent in the same
 * tick leave in one `writev` per few calls instead of a write syscall each; every command of the client goes
 * through that socket, corked or not, so the bytes and their order are the same. Not on a Cluster (a call's node
 * is only known inside the client) nor on a client that is not ready (its commands wait in the offline queue).
 */
export const coalesceWrites = (client: Client): void => {
  if (!client.isCluster && (client as Redis).status === "ready") beforeWrite((client as Redis).stream)
}

/**
 * {@link runScript} for the hot path of a script of one key without `WAIT` (a rate limiter's decision), as one
 * object per call (see `Call`): the same `EVALSHA` with the `EVAL` fallback on `NOSCRIPT`, its writes coalesced
 * with those of the calls sent in the same tick ({@link coalesceWrites}), and no array of keys or closures for the
 * variants it does not need. A subclass says what a reply means and what an error ends as; start it with
 * `Call.start` (its deadline and errors are `requestOr`'s).
 */
export abstract class KeyScriptCall<A, E> extends Call<A, E> {
  constructor(
    private readonly client: Client,
    private readonly s: Script,
    private readonly key: string,
    private readonly args: Args
  ) {
    super()
  }

  send(): Promise<unknown> {
    coalesceWrites(this.client)
    return (this.client as unknown as Eval).evalsha(this.s.sha, 1, this.key, ...this.args)
  }

  retry(error: unknown): Promise<unknown> | undefined {
    return isNoScript(error) ? (this.client as unknown as Eval).eval(this.s.lua, 1, this.key, ...this.args) : undefined
  }
}

/** Any other call (a command, a pipeline's or transaction's `exec`) with the same deadline and errors. */
export const call = <A, E>(
  send: () => Promise<unknown>,
  timeoutMillis: number,
  decode: (reply: unknown) => A,
  onError: (cause: unknown) => E
): Effect.Effect<A, E> => request(send, undefined, timeoutMillis, decode, onError)

/** A duration in milliseconds as a script argument; infinite durations become a century. */
export const millisArg = (ms: number): string => String(Number.isFinite(ms) ? ms : 3_155_760_000_000)

/** Lua helpers every script starts with: exact number formatting (`tostring` keeps only 14 digits). */
export const luaPrelude = `
local function num(x) return string.format("%.17g", x) end
local function px(ms) return string.format("%.0f", math.max(1, math.ceil(ms))) end
`
