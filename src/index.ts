/**
 * effect-resilience: timeouts, deadlines, retries, circuit breakers, rate limiters and idempotency
 * for Effect programs.
 *
 * @since 0.1.0
 */

/** @since 0.1.0 */
export * as Backoff from "./Backoff.js"
/** @since 0.1.0 */
export * as Deadline from "./Deadline.js"
/** @since 0.1.0 */
export * as Failure from "./Failure.js"
/** @since 0.1.0 */
export * as Retry from "./Retry.js"
/** @since 0.1.0 */
export * as RetryBudget from "./RetryBudget.js"
