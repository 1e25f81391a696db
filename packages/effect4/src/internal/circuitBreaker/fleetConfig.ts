/**
 * The fleet breaker's options, validated and decoded once, and the names it has in Redis: its keys and its
 * channel.
 */
import * as Fleet from "@effect-resilience/core/breakerFleet"
import type * as Window from "@effect-resilience/core/breakerWindow"
import type { Duration } from "effect"
import type { Options as LocalOptions } from "../../CircuitBreaker.js"
import type { Options } from "../../CircuitBreaker/Redis.js"
import type * as redis from "../redis/client.js"
import { checkConnection, type Connection, escapePart } from "../redis/options.js"
import * as validate from "../validate.js"
import { type Config, resolve } from "./policy.js"

export interface FleetConfig {
  readonly name: string
  readonly prefix: string
  readonly flushIntervalMillis: number
  readonly flushEvery: number
  readonly timeoutMillis: number
  readonly trialLeaseMillis: number
  /**
   * Skip the periodic flush when no call used the breaker since the last one (a keyed registry's breakers:
   * an idle key has nothing to send and nobody to tell, and would cost a script call per interval).
   */
  readonly skipIdle: boolean
}

const what = "CircuitBreaker/Redis"

export const resolveFleet = (options: Options): { readonly config: Config; readonly fleet: FleetConfig } => {
  if (typeof options !== "object" || options === null) validate.invalid(`${what} options are required`)
  const name = options.name
  if (typeof name !== "string" || name === "") {
    validate.invalid(
      `${what} needs a name: replicas share a breaker by its name (got ${
        name === undefined ? "no name" : JSON.stringify(name)
      })`
    )
  }
  const connection = options.redis as Connection | undefined
  if (typeof connection !== "object" || connection === null) {
    validate.invalid(`${what} needs redis: { url }, { client } or { cluster }`)
  } else checkConnection(what, connection)
  const prefix = options.prefix ?? "cb:"
  if (typeof prefix !== "string" || /[{}]/.test(prefix)) {
    validate.invalid(`${what} prefix must be a string without "{" or "}", got ${String(prefix)}`)
  }
  const millis = (key: string, input: Duration.Input | undefined, fallback: number) => {
    if (input === undefined) return fallback
    const ms = validate.millis(`${what} ${key}`, input, { finite: true })
    if (ms <= 0) validate.invalid(`${what} ${key} must be longer than zero`)
    return ms
  }
  const fleet: FleetConfig = {
    name,
    prefix,
    flushIntervalMillis: millis("flushInterval", options.flushInterval, 100),
    flushEvery: validate.positiveInt(`${what} flushEvery`, options.flushEvery ?? 1000),
    timeoutMillis: millis("timeout", options.timeout, 500),
    trialLeaseMillis: millis("trialLease", options.trialLease, 30_000),
    skipIdle: false
  }
  const { flushEvery: _1, flushInterval: _2, prefix: _3, redis: _4, timeout: _5, trialLease: _6, ...rest } = options
  const local: LocalOptions = { ...rest, name }
  // the state lives in Redis: there is nothing to restore (the option is not in the type; a cast could pass it)
  return { config: { ...resolve(local), initialState: undefined }, fleet }
}

/**
 * The keys and channel of one fleet breaker: one hash tag, so one Cluster slot. The window's key names the
 * trip policy (`Fleet.windowSignature`): a replica with another policy never reads a window it would misread.
 * A keyed breaker's key joins the name inside the tag (each part escaped, so `:` parts them unambiguously).
 */
export const keysOf = (prefix: string, name: string, trip: Window.Trip, key?: string) => {
  const base = `${prefix}{${escapePart(name)}${key === undefined ? "" : `:${escapePart(key)}`}}`
  return { state: base, window: `${base}:w:${Fleet.windowSignature(trip)}`, channel: `${base}:events` }
}

/**
 * The channel as the client reaches it: pub/sub knows no database and ioredis prefixes keys, not channels,
 * so the channel carries the client's `keyPrefix` (as its keys do in Redis) and its database when not 0 —
 * else a breaker of the same name in another database or app would hear this one's transitions.
 */
export const channelOf = (client: redis.Client, channel: string): string => {
  const options = client.options as { readonly keyPrefix?: string; readonly db?: number }
  const db = options.db ?? 0
  return `${options.keyPrefix ?? ""}${channel}${db === 0 ? "" : `:db${db}`}`
}
