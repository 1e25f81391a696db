import type { Duration } from "effect"

/**
 * The cleanup options of the stores kept in a SQL table (`IdempotencyStore/Sql`, `RateLimiterStore/Sql`): the rows a
 * store no longer needs are deleted in the background, in rounds of batches.
 */
export interface CleanupOptions {
  /**
   * Delete the rows no longer needed (the idempotency store's expired keys, the rate limiter's idle ones) in the
   * background while the layer lives (default `true`).
   */
  readonly cleanup?: boolean
  /** Pause between two cleanup rounds (default one minute). */
  readonly cleanupInterval?: Duration.Input
  /** Rows deleted per statement at most (default 1000): a round repeats batches until one comes back short. */
  readonly cleanupBatch?: number
}
