/**
 * The Effect 4 edition's adapter for the shared contract (packages/contract/suites, linked here as test/contract):
 * the few things a suite does that Effect 3 and Effect 4 spell differently, under one name. A suite imports it as
 * `#edition` (tsconfig.json's paths and vitest.config.ts's aliases); the Effect 3 edition's test/edition/ exports the
 * same names. Everything else a suite uses is the same in both: `effect`'s common API, `@effect/vitest`'s `it.effect`,
 * and this package's modules as `effect-resilience`.
 */
export * from "./breaker.js"
export * from "./client.js"
export * from "./effect.js"
export * from "./http.js"
export * from "./idempotency.js"
export * from "./policies.js"
export * from "./queue.js"
export * from "./redisRequest.js"
export * from "./services.js"
export * from "./web.js"
