/**
 * The serve process's side of `npm run overload -- --mix`: with `--shed`, `npm run serve` prints the load-shed
 * limit each time it has changed (`shed limit <n>`, polled every 50 ms), and the generator reads those lines back
 * from the process' output to report the limit a run reached (limitLines.ts reads them).
 */
import { Console, Effect, Metric, Schedule } from "effect"
import * as AdaptiveLimiter from "effect-resilience/AdaptiveLimiter"

const gauge = AdaptiveLimiter.limitGauge.pipe(Metric.tagged("limiter", "load-shed"))

/** Prints the limit whenever it moved since the last poll; runs until interrupted. */
export const reportShedLimit: Effect.Effect<never> = Effect.suspend(() => {
  let last = NaN
  return Metric.value(gauge).pipe(
    Effect.flatMap(({ value }) => {
      if (value === last) return Effect.void
      last = value
      return Console.log(`shed limit ${value}`)
    }),
    Effect.repeat(Schedule.spaced("50 millis")),
    Effect.zipRight(Effect.never)
  )
})
