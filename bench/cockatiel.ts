/**
 * The reference of the pipeline case: cockatiel's `wrap(retry, circuitBreaker, timeout)` on a succeeding call,
 * measured natively (`await policy.execute(...)`), Effect-free, the same for both editions. Cockatiel has no rate
 * limiter, so the pipeline it is compared with does strictly more work per call.
 */
import {
  circuitBreaker,
  ConsecutiveBreaker,
  ExponentialBackoff,
  handleAll,
  retry,
  timeout,
  TimeoutStrategy,
  wrap
} from "cockatiel"
import { timePromiseLoop } from "./measure.js"

export const cockatielPipelineName = "pipeline (cockatiel)"

const policy = wrap(
  retry(handleAll, { maxAttempts: 2, backoff: new ExponentialBackoff() }),
  circuitBreaker(handleAll, { halfOpenAfter: 10_000, breaker: new ConsecutiveBreaker(5) }),
  timeout(1_000, TimeoutStrategy.Aggressive)
)

/** ns per call: the median of rounds of sequential awaited calls. */
export const measureCockatielPipeline = (ops = 5_000, rounds = 7): Promise<number> =>
  timePromiseLoop((i) => policy.execute(() => Promise.resolve(i)), ops, rounds)

/** One round of `ops` calls, ns per call (to interleave with the Effect side's rounds). */
export const cockatielPipelineRound = async (ops = 5_000): Promise<number> => {
  const start = process.hrtime.bigint()
  for (let i = 0; i < ops; i++) await policy.execute(() => Promise.resolve(i))
  return Number(process.hrtime.bigint() - start) / ops
}
