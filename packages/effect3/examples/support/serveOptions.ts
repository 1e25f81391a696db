import { PgClient } from "@effect/sql-pg"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Clock, Effect, Layer, Redacted } from "effect"
import { IdempotencyStore, RateLimiterStore } from "effect-resilience"
import * as IdempotencyStoreRedis from "effect-resilience/IdempotencyStore/Redis"
import * as IdempotencyStoreSql from "effect-resilience/IdempotencyStore/Sql"
import * as RateLimiterStoreRedis from "effect-resilience/RateLimiterStore/Redis"
import * as RateLimiterStoreSql from "effect-resilience/RateLimiterStore/Sql"
import { databaseUrl, redisUrl, type ServeArgs } from "../../../../examples/support/serveArgs.js"

/**
 * The real clock shifted by `skewMillis` (`--clock-skew`): what a process whose clock is off sees. The
 * library reads time only from `Clock`, so the rate limiter and the idempotency store see it too.
 */
export const skewedClock = (skewMillis: number): Clock.Clock => {
  const real = Clock.make()
  const nanos = BigInt(skewMillis) * 1_000_000n
  return {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => real.unsafeCurrentTimeMillis() + skewMillis,
    unsafeCurrentTimeNanos: () => real.unsafeCurrentTimeNanos() + nanos,
    currentTimeMillis: Effect.sync(() => real.unsafeCurrentTimeMillis() + skewMillis),
    currentTimeNanos: Effect.sync(() => real.unsafeCurrentTimeNanos() + nanos),
    sleep: (duration) => real.sleep(duration)
  }
}

/**
 * The idempotency store and the rate-limit store the `--store` option picks: SQLite, PostgreSQL and Redis hold
 * both, so several processes share idempotency keys and one token bucket (one connection for both on SQL).
 */
export const storeLayers = (
  args: ServeArgs
): Layer.Layer<IdempotencyStore.IdempotencyStore | RateLimiterStore.RateLimiterStore, unknown> => {
  switch (args.store) {
    case "memory":
      // the load generators of the demos are one client (one address): the whole store is theirs
      return Layer.merge(
        IdempotencyStore.layerMemoryWith({ maxRecords: 10_000, maxRecordsPerScope: 10_000 }),
        RateLimiterStore.layerMemory
      )
    case "sqlite":
      return Layer.merge(
        IdempotencyStoreSql.layer(),
        RateLimiterStoreSql.layer({ onError: args.rateOnError })
      ).pipe(Layer.provide(SqliteClient.layer({ filename: args.db })))
    case "postgres":
      return Layer.merge(
        IdempotencyStoreSql.layer(),
        RateLimiterStoreSql.layer({ onError: args.rateOnError })
      ).pipe(Layer.provide(PgClient.layer({ url: Redacted.make(databaseUrl()) })))
    case "redis":
      return Layer.merge(
        IdempotencyStoreRedis.layer({ url: args.redisUrl ?? redisUrl() }),
        RateLimiterStoreRedis.layer({ url: args.redisUrl ?? redisUrl(), onError: args.rateOnError })
      )
  }
}
