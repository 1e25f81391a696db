/**
 * What the Redis stores share: getting a client (the caller's, or one the layer owns), running a Lua
 * script as `EVALSHA` with a fallback to `EVAL`, and a real-time deadline on every call.
 *
 * Imported only by the Redis backend entry points, so the package root does not load `ioredis`.
 */
import { Effect } from "effect"
import type { Scope } from "effect"
import { type Cluster, Redis } from "ioredis"
import { createHash } from "node:crypto"
import type { Connection } from "./redisOptions.js"

export type Client = Redis | Cluster

export type ClientOptions = Connection

/**
 * The caller's client as it is (never closed here), or a new client for `url` that is closed with the
 * scope. A client made here fails fast while Redis is down instead of queueing commands for a long
 * reconnect (one retry per command); every call has its own deadline anyway (`runScript`).
 */
export const acquire = (options: ClientOptions): Effect.Effect<Client, never, Scope.Scope> => {
  if ("client" in options) return Effect.succeed(options.client)
  return Effect.acquireRelease(
    Effect.sync(() => {
      const client = new Redis(options.url, {
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
          // a real deadline for a network goodbye (see `runScript`)
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

// ioredis types `evalsha` per class; Redis and Cluster share the implementation
type Args = ReadonlyArray<string | Buffer>
interface Eval {
  evalsha(sha: string, numKeys: number, ...args: Args): Promise<unknown>
  eval(lua: string, numKeys: number, ...args: Args): Promise<unknown>
  evalshaBuffer(sha: string, numKeys: number, ...args: Args): Promise<unknown>
  evalBuffer(lua: string, numKeys: number, ...args: Args): Promise<unknown>
}

/**
 * Runs a one-key script as an effect: `EVALSHA`, and on `NOSCRIPT` (a restarted server, a new Cluster
 * node, `SCRIPT FLUSH`) `EVAL`, which also caches the script for the next `EVALSHA`. With `buffers`,
 * bulk replies are `Buffer`s. The reply goes through `decode`; a rejection, a throw in `decode`, or no
 * reply within `timeoutMillis` fails with `onError(cause)`.
 *
 * Hot path of every decision: one promise callback pair, one timer, no intermediate promises.
 */
export const runScript = <A, E>(
  client: Client,
  s: Script,
  key: string,
  args: Args,
  buffers: boolean,
  timeoutMillis: number,
  decode: (reply: unknown) => A,
  onError: (cause: unknown) => E
): Effect.Effect<A, E> =>
  Effect.async<A, E>((resume) => {
    const c = client as unknown as Eval
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
      if (!isNoScript(error)) return fail(error)
      try {
        ;(buffers ? c.evalBuffer(s.lua, 1, key, ...args) : c.eval(s.lua, 1, key, ...args)).then(succeed, fail)
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
      ;(buffers ? c.evalshaBuffer(s.sha, 1, key, ...args) : c.evalsha(s.sha, 1, key, ...args)).then(succeed, fallback)
    } catch (cause) {
      fail(cause)
    }
    // interrupted while waiting: the command may still run on the server, but nobody waits for it
    return Effect.sync(() => {
      settled = true
      clearTimeout(timer)
    })
  })

/** Why a call failed when Redis did not answer in time. */
export class RedisTimeout extends Error {
  constructor(readonly millis: number) {
    super(`Redis did not answer within ${millis} ms`)
    this.name = "RedisTimeout"
  }
}

/** A duration in milliseconds as a script argument; infinite durations become a century. */
export const millisArg = (ms: number): string => String(Number.isFinite(ms) ? ms : 3_155_760_000_000)

/** Lua helpers every script starts with: exact number formatting (`tostring` keeps only 14 digits). */
export const luaPrelude = `
local function num(x) return string.format("%.17g", x) end
local function px(ms) return string.format("%.0f", math.max(1, math.ceil(ms))) end
`
