/**
 * The one Redis adapter of the library, used by every Redis backend (in this edition so far the rate-limit
 * store): getting a client (the caller's, or one the layer owns), running Lua scripts as `EVALSHA` with a
 * reload on `NOSCRIPT`, and a real-time deadline on every call. (The Effect 3 edition's copy also has the
 * pub/sub listener and the Lua prelude the other backends use; they come with those backends.)
 *
 * Imported only by the Redis backend entry points, so the package root does not load `ioredis`.
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import { Cluster, Redis } from "ioredis"
import { createHash } from "node:crypto"
import type { Connection } from "./options.js"

export type Client = Redis | Cluster

export type ClientOptions = Connection

/**
 * The caller's client as it is (never closed here), or a new client for `url` (one node) or `cluster`
 * (startup nodes of a Redis Cluster) that is closed with the scope. A client made here fails fast while
 * Redis is down instead of queueing commands for a long reconnect (one retry per command); every call has
 * its own deadline anyway (`request`).
 */
export const acquire = (options: ClientOptions): Effect.Effect<Client, never, Scope.Scope> => {
  if ("client" in options) return Effect.succeed(options.client)
  return Effect.acquireRelease(
    Effect.sync(() => {
      const client: Client = "cluster" in options
        ? new Cluster([...options.cluster], {
          ...options.clusterOptions,
          redisOptions: { maxRetriesPerRequest: 1, ...options.clusterOptions?.redisOptions }
        })
        : new Redis(options.url, {
          maxRetriesPerRequest: 1,
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

/** Why a call failed when Redis did not answer in time. */
export class RedisTimeout extends Error {
  constructor(readonly millis: number) {
    super(`Redis did not answer within ${millis} ms`)
    this.name = "RedisTimeout"
  }
}

/**
 * Sends one request as an effect: `send()`, and when it rejects with an error `retry` accepts (it returns a
 * promise for it), that second promise instead. The reply goes through `decode`; a rejection, a throw in
 * `send` or `decode`, or no reply within `timeoutMillis` fails with `onError(cause)`. A blocking command
 * (`XREADGROUP … BLOCK`, `BLPOP`) would need `timeoutMillis` to add its block time, or every quiet wait
 * would count as an outage; the library sends none (the stream queue reads without `BLOCK`).
 *
 * Hot path of every decision: one promise callback pair, one timer, no intermediate promises.
 *
 * Effect 4 resumes a `callback` wait on the resumer's stack; here the resumer is a promise callback or a timer,
 * each on a fresh stack of its own, so these waits cannot nest and need no depth guard (`internal/resume.ts`).
 */
export const request = <A, E>(
  send: () => Promise<unknown>,
  retry: ((error: unknown) => Promise<unknown> | undefined) | undefined,
  timeoutMillis: number,
  decode: (reply: unknown) => A,
  onError: (cause: unknown) => E
): Effect.Effect<A, E> =>
  Effect.callback<A, E>((resume) => {
    let settled = false
    const fail = (cause: unknown) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      resume(Effect.fail(onError(cause)))
    }
    const succeed = (reply: unknown) => {
      if (settled) return
      let a: A
      try {
        a = decode(reply)
      } catch (cause) {
        fail(cause)
        return
      }
      settled = true
      clearTimeout(timer)
      resume(Effect.succeed(a))
    }
    const fallback = (error: unknown) => {
      if (settled) return
      try {
        const again = retry?.(error)
        if (again === undefined) return fail(error)
        again.then(succeed, fail)
      } catch (cause) {
        fail(cause)
      }
    }
    // A real timer on purpose: it bounds network I/O, which happens in real time, and must fire
    // under TestClock too (a test clock that never moves would turn a dead server into a hung
    // test). It decides nothing about the result.
    // eslint-disable-next-line no-restricted-globals
    const timer = setTimeout(() => {
      if (settled) return
      settled = true
      resume(Effect.fail(onError(new RedisTimeout(timeoutMillis))))
    }, timeoutMillis)
    timer.unref()
    try {
      send().then(succeed, retry === undefined ? fail : fallback)
    } catch (cause) {
      fail(cause)
    }
    // interrupted while waiting: the command may still run on the server, but nobody waits for it
    return Effect.sync(() => {
      settled = true
      clearTimeout(timer)
    })
  })

// ioredis types `evalsha` per class; Redis and Cluster share the implementation
type Args = ReadonlyArray<string | Buffer>
interface Eval {
  evalsha(sha: string, numKeys: number, ...args: Args): Promise<unknown>
  eval(lua: string, numKeys: number, ...args: Args): Promise<unknown>
  evalshaBuffer(sha: string, numKeys: number, ...args: Args): Promise<unknown>
  evalBuffer(lua: string, numKeys: number, ...args: Args): Promise<unknown>
}

/**
 * Runs a script as an effect: `EVALSHA`, and on `NOSCRIPT` (a restarted server, a new Cluster node,
 * `SCRIPT FLUSH`) `EVAL`, which also caches the script for the next `EVALSHA`. With `buffers`, bulk
 * replies are `Buffer`s. On a Cluster, `keys` must share a hash slot (a common hash tag).
 */
export const runScript = <A, E>(
  client: Client,
  s: Script,
  keys: ReadonlyArray<string>,
  args: Args,
  buffers: boolean,
  timeoutMillis: number,
  decode: (reply: unknown) => A,
  onError: (cause: unknown) => E
): Effect.Effect<A, E> => {
  const c = client as unknown as Eval
  const n = keys.length
  return request(
    () => buffers ? c.evalshaBuffer(s.sha, n, ...keys, ...args) : c.evalsha(s.sha, n, ...keys, ...args),
    (error) =>
      isNoScript(error)
        ? (buffers ? c.evalBuffer(s.lua, n, ...keys, ...args) : c.eval(s.lua, n, ...keys, ...args))
        : undefined,
    timeoutMillis,
    decode,
    onError
  )
}

/** A duration in milliseconds as a script argument; infinite durations become a century. */
export const millisArg = (ms: number): string => String(Number.isFinite(ms) ? ms : 3_155_760_000_000)
