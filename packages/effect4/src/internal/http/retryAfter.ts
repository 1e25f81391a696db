import * as core from "@effect-resilience/core/retryAfter"
import { Duration, Option } from "effect"

export const maxDelaySeconds = core.maxDelaySeconds

export const parseHttpDate = (value: string): Option.Option<number> => Option.fromNullishOr(core.parseHttpDate(value))

export const parse = (headerValue: string, nowMillis: number): Option.Option<Duration.Duration> => {
  const ms = core.parse(headerValue, nowMillis)
  // Duration.millis(Infinity) is Duration.infinity
  return ms === undefined ? Option.none() : Option.some(Duration.millis(ms))
}

export const format = (duration: Duration.Input): string => {
  const d = Duration.fromInputUnsafe(duration)
  switch (d.value._tag) {
    case "Infinity":
      return core.formatMillis(Infinity)
    case "NegativeInfinity":
      // Effect 4 durations may be negative: never a negative delay
      return core.formatMillis(-Infinity)
    case "Nanos":
      return core.formatNanos(d.value.nanos)
    case "Millis":
      // through milliseconds, not nanoseconds: millis * 1e6 loses precision past 2^53
      return core.formatMillis(d.value.millis)
  }
}
