/**
 * effect-resilience: timeouts, deadlines, retries, circuit breakers, rate limiters and idempotency
 * for Effect programs.
 *
 * The root needs only `effect` and `@effect/platform`. The backends that need an optional peer dependency are
 * entry points of their own: `effect-resilience/IdempotencyStore/Sql`, `…/IdempotencyStore/Redis`,
 * `…/RateLimiterStore/Redis`, `…/Consumer/Sql`, `…/PgQueue`, `…/Outbox`, `…/RedisStreamQueue` and
 * `…/ResilientHttpClient/Node`. `effect-resilience/Chaos` (fault injection for tests and drills) is a
 * subpath only, so that it is never one import away in production code.
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
export * as ClientScope from "./ClientScope.js"
/** @since 0.1.0 */
export * as CircuitBreaker from "./CircuitBreaker.js"
/** @since 0.1.0 */
export * as Consumer from "./Consumer.js"
/** @since 0.1.0 */
export * as Criticality from "./Criticality.js"
/** @since 0.1.0 */
export * as DeadLetter from "./DeadLetter.js"
/** @since 0.1.0 */
export * as Deadline from "./Deadline.js"
/** @since 0.1.0 */
export * as DeadlineMiddleware from "./DeadlineMiddleware.js"
/** @since 0.1.0 */
export * as Failure from "./Failure.js"
/** @since 0.1.0 */
export * as Hedge from "./Hedge.js"
/** @since 0.1.0 */
export * as HttpClassify from "./HttpClassify.js"
/** @since 0.1.0 */
export * as HttpErrors from "./HttpErrors.js"
/** @since 0.1.0 */
export * as IdempotencyMiddleware from "./IdempotencyMiddleware.js"
/** @since 0.1.0 */
export * as IdempotencyStore from "./IdempotencyStore.js"
/** @since 0.1.0 */
export * as LoadShedMiddleware from "./LoadShedMiddleware.js"
/** @since 0.1.0 */
export * as QueueSource from "./QueueSource.js"
/** @since 0.1.0 */
export * as RateLimiter from "./RateLimiter.js"
/** @since 0.1.0 */
export * as RateLimiterStore from "./RateLimiterStore.js"
/** @since 0.1.0 */
export * as RateLimitHeaders from "./RateLimitHeaders.js"
/** @since 0.1.0 */
export * as RateLimitMiddleware from "./RateLimitMiddleware.js"
/** @since 0.1.0 */
export * as ResilientHttpClient from "./ResilientHttpClient.js"
/** @since 0.1.0 */
export * as Retry from "./Retry.js"
/** @since 0.1.0 */
export * as RetryAfter from "./RetryAfter.js"
/** @since 0.1.0 */
export * as RetryBudget from "./RetryBudget.js"
/** @since 0.1.0 */
export * as StructuredFields from "./StructuredFields.js"
