/**
 * effect-resilience for Effect 4: timeouts, deadlines, retries, retry budgets, bulkheads, hedging and
 * idempotency stores.
 *
 * The same modules, names, error tags and semantics as the Effect 3 edition, over the same pure core. This
 * edition is being built: the modules below are ported; the breaker, the limiters, the HTTP and queue modules
 * follow.
 *
 * @since 1.0.0
 */

/** @since 1.0.0 */
export * as Backoff from "./Backoff.js"
/** @since 1.0.0 */
export * as Bulkhead from "./Bulkhead.js"
/** @since 1.0.0 */
export * as Criticality from "./Criticality.js"
/** @since 1.0.0 */
export * as Deadline from "./Deadline.js"
/** @since 1.0.0 */
export * as Failure from "./Failure.js"
/** @since 1.0.0 */
export * as Hedge from "./Hedge.js"
/** @since 1.0.0 */
export * as IdempotencyStore from "./IdempotencyStore.js"
/** @since 1.0.0 */
export * as Retry from "./Retry.js"
/** @since 1.0.0 */
export * as RetryBudget from "./RetryBudget.js"
