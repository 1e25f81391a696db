/**
 * The idempotency store in Redis (or Redis Cluster), shared by every process that uses it, on `ioredis`.
 * This entry point imports `ioredis` (an optional peer dependency); the package root does not.
 *
 * @since 0.1.0
 */
import type { Duration, Layer } from "effect"
import type { IdempotencyStore } from "../IdempotencyStore.js"
import * as internal from "../internal/idempotencyStore/redis.js"
import type * as redisOptions from "../internal/redis/options.js"

/**
 * Options of the Redis store: exactly one of a client you own (`client`, an ioredis `Redis` or `Cluster`,
 * never closed by the layer), a `url` of one node, or the startup nodes of a Redis Cluster (`cluster`, with
 * optional `clusterOptions`); the layer connects to the last two itself and disconnects when it is released
 * (`redisOptions` / `clusterOptions` are passed to ioredis). A client the layer makes pipelines automatically
 * (ioredis' `enableAutoPipelining`, unless those options say otherwise): the claims and completions that many
 * requests send in one tick go to Redis in one write. Give a client of yours that option for the same effect. Keys and slots: `docs/redis.md`.
 *
 * - `prefix`: put before every key (default `"idem:"`); must not contain `{` or `}`.
 * - `timeout`: a call that Redis has not answered by then fails with `IdempotencyStoreError` (default 2 seconds).
 * - `expiryMargin`: how long after a record expired by the caller's clock Redis deletes it (default
 *   1 minute) — the tolerance for clock skew between the processes sharing the store.
 * - `waitReplicas`: `{ replicas, timeout }` — after each claim, completion and renewal, `WAIT` until that
 *   many replicas have it, or fail the call with `IdempotencyStoreError` (its cause a `NotReplicated` error)
 *   when fewer did within `timeout` (shorter than `timeout` above). Redis replicates asynchronously: a write
 *   its master acknowledged and died before sending is missing on the promoted replica, and a claim or
 *   completion lost that way lets a retry run the handler again. Off by default: it adds a round trip to a
 *   replica to every call, and while a master has fewer replicas than asked (one died, a failover promoted
 *   the only one) every call on its keys fails. Measurements: `docs/reliability.md`.
 *
 * @since 0.1.0
 * @category models
 */
export type Options = redisOptions.Connection & redisOptions.CommonOptions & {
  readonly waitReplicas?: {
    readonly replicas: number
    readonly timeout: Duration.DurationInput
  }
}

/**
 * The store as a layer. Each operation is one Lua script (`EVALSHA`, falling back to `EVAL`), so a claim
 * is atomic and completion, renewal and release are compare-and-set on the owner's fencing token. Leases
 * and TTLs are decided with the caller's `Clock`. Every Redis error or timeout becomes an
 * `IdempotencyStoreError`, on which the middleware answers 503. See `docs/stores.md`.
 *
 * Throws `IllegalArgumentException` for options naming no connection (or more than one), a prefix with
 * braces, a malformed duration, or a `waitReplicas` with fewer than one replica or a timeout not between
 * zero and `timeout`.
 *
 * @example
 * ```ts
 * import * as IdempotencyStoreRedis from "effect-resilience/IdempotencyStore/Redis"
 *
 * const StoreLive = IdempotencyStoreRedis.layer({ url: "redis://127.0.0.1:6379", prefix: "shop:idem:" })
 * ```
 *
 * @since 0.1.0
 * @category layers
 */
export const layer: (options: Options) => Layer.Layer<IdempotencyStore> = internal.layer
