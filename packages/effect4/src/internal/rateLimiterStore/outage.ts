import { Effect } from "effect"
import type { StoreDecision } from "../../RateLimiterStore.js"

/** How often at most an outage is logged: every failing decision would flood the log. */
const WARN_EVERY_MILLIS = 10_000

/**
 * What a shared store decides while its backend fails (`onError`: allow, or deny with `retryAfterOnError`), every
 * decision marked `outage`. The warning `"<store>: <backend> failed, allowing|denying requests"` is logged at most
 * every {@link WARN_EVERY_MILLIS} of the limiter's clock, with the number of warnings left out since the last one.
 */
export const outagePolicy = (
  options: { readonly onError: "allow" | "deny"; readonly retryAfterOnErrorMillis: number },
  failed: string
) => {
  let lastWarning = -Infinity
  let suppressed = 0
  return (limit: number, nowMillis: number, cause: unknown): Effect.Effect<StoreDecision> => {
    const decision: StoreDecision = options.onError === "allow"
      ? { allowed: true, limit, remaining: 0, retryAfterMillis: 0, resetAfterMillis: 0, outage: true }
      : {
        allowed: false,
        limit,
        remaining: 0,
        retryAfterMillis: options.retryAfterOnErrorMillis,
        resetAfterMillis: options.retryAfterOnErrorMillis,
        outage: true
      }
    if (nowMillis - lastWarning < WARN_EVERY_MILLIS) {
      suppressed++
      return Effect.succeed(decision)
    }
    const skipped = suppressed
    lastWarning = nowMillis
    suppressed = 0
    return Effect.as(
      Effect.logWarning(`${failed}, ${options.onError === "allow" ? "allowing" : "denying"} requests`, cause).pipe(
        Effect.annotateLogs({ onError: options.onError, suppressedWarnings: skipped })
      ),
      decision
    )
  }
}
