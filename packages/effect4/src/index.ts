/**
 * effect-resilience for Effect 4: timeouts, deadlines, retries, retry budgets, bulkheads, hedging, rate limiters,
 * adaptive concurrency limits and client-side throttling, idempotency stores, at-least-once queue consumers with
 * dead-letter queues and the transactional outbox, and the HTTP header parsers they need.
 *
 * The same modules, names, error tags and semantics as the Effect 3 edition, over the same pure core. The
 * backends are entry points of their own (`effect-resilience/RateLimiterStore/Redis`, `effect-resilience/PgQueue`,
 * `effect-resilience/Outbox`), so this root needs only `effect`. `effect-resilience/Chaos` (fault injection for tests
 * and drills) is a subpath only, so that it is never one import away in production code.
 *
 * @since 1.0.0
 */

/** @since 1.0.0 */
export * as AdaptiveLimiter from "./AdaptiveLimiter.js"
/** @since 1.0.0 */
export * as AdaptiveThrottle from "./AdaptiveThrottle.js"
/** @since 1.0.0 */
export * as Backoff from "./Backoff.js"
/** @since 1.0.0 */
export * as Bulkhead from "./Bulkhead.js"
/** @since 1.0.0 */
export * as CircuitBreaker from "./CircuitBreaker.js"
/** @since 1.0.0 */
export * as Criticality from "./Criticality.js"
/** @since 1.0.0 */
export * as Deadline from "./Deadline.js"
/** @since 1.0.0 */
export * as Failure from "./Failure.js"
/** @since 1.0.0 */
export * as Hedge from "./Hedge.js"
/** @since 1.0.0 */
export * as HttpClassify from "./HttpClassify.js"
/** @since 1.0.0 */
export * as HttpErrors from "./HttpErrors.js"
/** @since 1.0.0 */
export * as RateLimitHeaders from "./RateLimitHeaders.js"
/** @since 1.0.0 */
export * as RateLimiter from "./RateLimiter.js"
/** @since 1.0.0 */
export * as IdempotencyStore from "./IdempotencyStore.js"
export * as RateLimiterStore from "./RateLimiterStore.js"
/** @since 1.0.0 */
export * as ResilientHttpClient from "./ResilientHttpClient.js"
/** @since 1.0.0 */
export * as Retry from "./Retry.js"
/** @since 1.0.0 */
export * as RetryAfter from "./RetryAfter.js"
/** @since 1.0.0 */
export * as RetryBudget from "./RetryBudget.js"
/** @since 1.0.0 */
export * as StructuredFields from "./StructuredFields.js"
/** @since 1.0.0 */
export * as Telemetry from "./Telemetry.js"
/** @since 1.0.0 */
export * as ClientScope from "./ClientScope.js"
/** @since 1.0.0 */
export * as DeadlineMiddleware from "./DeadlineMiddleware.js"
/** @since 1.0.0 */
export * as IdempotencyMiddleware from "./IdempotencyMiddleware.js"
/** @since 1.0.0 */
export * as LoadShedMiddleware from "./LoadShedMiddleware.js"
/** @since 1.0.0 */
export * as RateLimitMiddleware from "./RateLimitMiddleware.js"
/** @since 1.0.0 */
export * as Consumer from "./Consumer.js"
/** @since 1.0.0 */
export * as DeadLetter from "./DeadLetter.js"
/** @since 1.0.0 */
export * as QueueSource from "./QueueSource.js"
