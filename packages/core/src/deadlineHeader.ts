/**
 * The remaining-time header between the resilient client and `DeadlineMiddleware` (`Request-Timeout-Ms`):
 * relative whole milliseconds, so the clocks of the two machines never need to agree.
 */

/** A header value as milliseconds: ASCII digits only (at most 15), surrounding whitespace allowed. */
export const parse = (value: string): number | undefined => {
  const trimmed = value.trim()
  if (!/^[0-9]{1,15}$/.test(trimmed)) return undefined
  return Number(trimmed)
}

/**
 * The server's budget for a request: what the header asks (clamped to `maxMillis`), else `fallbackMillis`
 * (undefined: no deadline of the middleware's own).
 */
export const serverBudget = (
  requested: number | undefined,
  maxMillis: number,
  fallbackMillis: number | undefined
): number | undefined => requested === undefined ? fallbackMillis : Math.min(requested, maxMillis)

/**
 * What the client sends for one attempt: `min(attempt timeout, time left until the deadline)` in whole
 * milliseconds rounded down (never promise the server more time than the client waits), never negative;
 * `undefined` (no header) when there is no finite budget.
 */
export const clientValue = (
  attemptMillis: number,
  deadlineMillis: number | undefined,
  nowMillis: number
): string | undefined => {
  const budget = deadlineMillis === undefined ? attemptMillis : Math.min(attemptMillis, deadlineMillis - nowMillis)
  return Number.isFinite(budget) ? String(Math.max(0, Math.floor(budget))) : undefined
}
