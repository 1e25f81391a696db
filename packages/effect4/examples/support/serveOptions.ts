/**
 * What `npm run serve`'s options build on Effect 4: the skewed clock and the stores. The command line itself is
 * the Effect 3 edition's (examples/support/serveArgs.ts, plain TypeScript, shared).
 */
import { PgClient } from "@effect/sql-pg"
import { Clock, Effect, Layer, Redacted } from "effect"
import { IdempotencyStore, RateLimiterStore } from "effect-resilience"
import * as IdempotencyStoreRedis from "effect-resilience/IdempotencyStore/Redis"
import * as IdempotencyStoreSql from "effect-resilience/IdempotencyStore/Sql"
import * as RateLimiterStoreRedis from "effect-resilience/RateLimiterStore/Redis"
import * as RateLimiterStoreSql from "effect-resilience/RateLimiterStore/Sql"
import * as Sqlite from "effect-resilience/Sqlite"
import { databaseUrl, redisUrl, type ServeArgs } from "../../../../examples/support/serveArgs.js"

/**
 * Runs `effect` with the current clock shifted by `skewMillis` (`--clock-skew`): what a process whose clock is off
 * sees. The library reads time only from `Clock`, so the rate limiter and the idempotency store see it too.
 */
export const withClockSkew = (skewMillis: number) => <A, E, R>(effect: Effect.Effect<A, E, R>) =>
  skewMillis === 0 ? effect : Effect.flatMap(Clock.Clock, (real) => {
    const nanos = BigInt(skewMillis) * 1_000_000n
    const skewed: Clock.Clock = {
      currentTimeMillisUnsafe: () => real.currentTimeMillisUnsafe() + skewMillis,
      currentTimeMillis: Effect.sync(() => real.currentTimeMillisUnsafe() + skewMillis),
      currentTimeNanosUnsafe: () => real.currentTimeNanosUnsafe() + nanos,
      currentTimeNanos: Effect.sync(() => real.currentTimeNanosUnsafe() + nanos),
      // durations are not skewed: only the wall-clock reading is off
      monotonicTimeNanosUnsafe: () => real.monotonicTimeNanosUnsafe(),
      monotonicTimeNanos: real.monotonicTimeNanos,
      sleep: (duration) => real.sleep(duration)
    }
    return Effect.provideService(effect, Clock.Clock, skewed)
  })

/**
 * The idempotency store and the rate-limit store the `--store` option picks: SQLite (the edition's own driver over
 * `node:sqlite`), PostgreSQL and Redis hold both, so several processes share idempotency keys and one token
 * bucket (one connection for both on SQL).
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
      ).pipe(Layer.provide(Sqlite.layer({ filename: args.db })))
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
