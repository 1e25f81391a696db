/**
 * effect-resilience: timeouts, deadlines, retries, circuit breakers, rate limiters and idempotency
 * for Effect programs.
 *
 * The root needs only `effect` and `@effect/platform`. The backends that need an optional peer dependency are
 * entry points of their own: `effect-resilience/IdempotencyStore/Sql`, `…/IdempotencyStore/Redis`,
 * `…/RateLimiterStore/Redis`, `…/Consumer/Sql`, `…/PgQueue`, `…/Outbox`, `…/RedisStreamQueue` and
 * `…/ResilientHttpClient/Node`.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as AdaptiveLimiter from "./AdaptiveLimiter.js"
/** @since 0.1.0 */
export * as AdaptiveThrottle from "./AdaptiveThrottle.js"
/** @since 0.1.0 */
export * as Backoff from "./Backoff.js"
/** @since 0.1.0 */
export * as Bulkhead from "./Bulkhead.js"
/** @since 0.1.0 */
export * as Chaos from "./http/Chaos.js"
/** @since 0.1.0 */
export * as ClientScope from "./http/ClientScope.js"
/** @since 0.1.0 */
export * as CircuitBreaker from "./CircuitBreaker.js"
/** @since 0.1.0 */
export * as Consumer from "./queue/Consumer.js"
/** @since 0.1.0 */
export * as Criticality from "./Criticality.js"
/** @since 0.1.0 */
export * as DeadLetter from "./queue/DeadLetter.js"
/** @since 0.1.0 */
export * as Deadline from "./Deadline.js"
/** @since 0.1.0 */
export * as DeadlineMiddleware from "./http/DeadlineMiddleware.js"
/** @since 0.1.0 */
export * as Failure from "./Failure.js"
/** @since 0.1.0 */
export * as Hedge from "./Hedge.js"
/** @since 0.1.0 */
export * as HttpClassify from "./http/HttpClassify.js"
/** @since 0.1.0 */
export * as HttpErrors from "./http/HttpErrors.js"
/** @since 0.1.0 */
export * as IdempotencyMiddleware from "./http/IdempotencyMiddleware.js"
/** @since 0.1.0 */
export * as IdempotencyStore from "./IdempotencyStore.js"
/** @since 0.1.0 */
export * as LoadShedMiddleware from "./http/LoadShedMiddleware.js"
/** @since 0.1.0 */
export * as QueueSource from "./queue/QueueSource.js"
/** @since 0.1.0 */
export * as RateLimiter from "./RateLimiter.js"
/** @since 0.1.0 */
export * as RateLimiterStore from "./RateLimiterStore.js"
/** @since 0.1.0 */
export * as RateLimitHeaders from "./http/RateLimitHeaders.js"
/** @since 0.1.0 */
export * as RateLimitMiddleware from "./http/RateLimitMiddleware.js"
/** @since 0.1.0 */
export * as ResilientHttpClient from "./http/ResilientHttpClient.js"
/** @since 0.1.0 */
export * as Retry from "./Retry.js"
/** @since 0.1.0 */
export * as RetryAfter from "./http/RetryAfter.js"
/** @since 0.1.0 */
export * as RetryBudget from "./RetryBudget.js"
/** @since 0.1.0 */
export * as StructuredFields from "./http/StructuredFields.js"
