/**
 * Validation and defaults of the Redis layers' options, apart from `client.ts` (the client and scripts).
 * Its `ioredis` imports are type-only.
 */
import type { Duration } from "effect"
import type { Cluster, ClusterNode, ClusterOptions, Redis, RedisOptions } from "ioredis"
import * as validate from "../validate.js"

/**
 * How a Redis store reaches Redis: a client of yours (`Redis` or `Cluster`, never closed by the store), a
 * URL of one node, or the startup nodes of a Redis Cluster; the store connects to the last two itself and
 * disconnects when its layer is released.
 */
export type Connection =
  | { readonly client: Redis | Cluster }
  | { readonly url: string; readonly redisOptions?: RedisOptions }
  | { readonly cluster: ReadonlyArray<ClusterNode>; readonly clusterOptions?: ClusterOptions }

/** Rejects options that name no way (or more than one way) to reach Redis: a wiring mistake. */
export const checkConnection = (what: string, options: Connection): void => {
  const given = (["client", "url", "cluster"] as const).filter((k) => k in options)
  if (given.length !== 1) {
    validate.invalid(`${what} needs exactly one of client, url or cluster, got ${given.join(", ") || "none"}`)
  }
  if ("client" in options && (typeof options.client !== "object" || options.client === null)) {
    validate.invalid(`${what} client must be an ioredis Redis or Cluster, got ${String(options.client)}`)
  }
  if ("url" in options && typeof options.url !== "string") {
    validate.invalid(`${what} url must be a string, got ${String(options.url)}`)
  }
  if ("cluster" in options && (!Array.isArray(options.cluster) || options.cluster.length === 0)) {
    validate.invalid(`${what} cluster must be a non-empty list of startup nodes`)
  }
}

export interface CommonOptions {
  readonly prefix?: string
  readonly timeout?: Duration.Input
  readonly expiryMargin?: Duration.Input
}

export interface Defaults {
  readonly prefix: string
  readonly timeoutMillis: number
  readonly marginMillis: number
}

export const idempotencyDefaults: Defaults = { prefix: "idem:", timeoutMillis: 2000, marginMillis: 60_000 }
export const rateLimiterDefaults: Defaults = { prefix: "rl:", timeoutMillis: 1000, marginMillis: 1000 }

export interface Resolved {
  readonly prefix: string
  readonly timeoutMillis: number
  readonly marginMillis: number
}

export const resolve = (
  what: string,
  options: CommonOptions,
  defaults: Defaults
): Resolved => {
  const prefix = options.prefix ?? defaults.prefix
  // a brace in the prefix would become the Cluster hash tag of every key: one slot for everything
  if (typeof prefix !== "string" || /[{}]/.test(prefix)) {
    validate.invalid(`${what} prefix must be a string without "{" or "}", got ${String(prefix)}`)
  }
  const timeoutMillis = options.timeout === undefined
    ? defaults.timeoutMillis
    : validate.millis(`${what} timeout`, options.timeout, { finite: true })
  if (timeoutMillis <= 0) validate.invalid(`${what} timeout must be longer than zero`)
  const marginMillis = options.expiryMargin === undefined
    ? defaults.marginMillis
    : validate.millis(`${what} expiryMargin`, options.expiryMargin, { finite: true })
  return { prefix, timeoutMillis, marginMillis }
}

export { escapePart, hashTagOf } from "@effect-resilience/core/redisKey"

export interface RateLimiterOptions extends CommonOptions {
  readonly onError?: "allow" | "deny"
  readonly retryAfterOnError?: Duration.Input
}

export interface ResolvedRateLimiter extends Resolved {
  readonly onError: "allow" | "deny"
  readonly retryAfterOnErrorMillis: number
}

export const resolveRateLimiter = (options: RateLimiterOptions): ResolvedRateLimiter => {
  const what = "RateLimiterStore/Redis"
  const onError = options.onError ?? "deny"
  if (onError !== "allow" && onError !== "deny") {
    validate.invalid(`${what} onError must be "allow" or "deny", got ${String(onError)}`)
  }
  const retryAfterOnErrorMillis = options.retryAfterOnError === undefined
    ? 1000
    : validate.millis(`${what} retryAfterOnError`, options.retryAfterOnError, { finite: true })
  return { ...resolve(what, options, rateLimiterDefaults), onError, retryAfterOnErrorMillis }
}
