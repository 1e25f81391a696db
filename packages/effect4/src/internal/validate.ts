import { Cause, Duration, Option } from "effect"

/** Fails loudly when a policy is built with input that could never work. */
export const invalid = (what: string): never => {
  throw new Cause.IllegalArgumentError(`effect-resilience: ${what}`)
}

/**
 * Decodes a duration, rejecting NaN, negative and unparseable input instead of clamping it. Effect 4's
 * `Duration.Input` admits negative durations (and decodes `NaN` as zero), so both are refused here first.
 */
export const millis = (name: string, input: Duration.Input, opts?: { readonly finite?: boolean }): number => {
  if (typeof input === "number" && (Number.isNaN(input) || input < 0)) {
    return invalid(`${name} must be a non-negative duration, got ${input}`)
  }
  if (
    (typeof input === "bigint" && input < BigInt(0)) ||
    (typeof input === "string" && /^\s*-/.test(input)) ||
    (Array.isArray(input) && (input[0] < 0 || input[1] < 0 || Number.isNaN(input[0]) || Number.isNaN(input[1])))
  ) {
    return invalid(`${name} must be a non-negative duration, got ${String(input)}`)
  }
  let decoded: Option.Option<Duration.Duration>
  try {
    decoded = Duration.fromInput(input)
  } catch {
    decoded = Option.none()
  }
  if (Option.isNone(decoded)) return invalid(`${name} is not a duration: ${String(input)}`)
  const ms = Duration.toMillis(decoded.value)
  if (Number.isNaN(ms) || ms < 0) return invalid(`${name} must be a non-negative duration, got ${String(input)}`)
  if (opts?.finite === true && !Number.isFinite(ms)) return invalid(`${name} must be finite`)
  return ms
}

export const positiveInt = (name: string, n: number, opts?: { readonly allowInfinity?: boolean }): number => {
  if (opts?.allowInfinity === true && n === Infinity) return n
  if (!Number.isInteger(n) || n < 1) return invalid(`${name} must be an integer >= 1, got ${n}`)
  return n
}

export const positive = (name: string, n: number): number => {
  if (!(typeof n === "number" && Number.isFinite(n) && n > 0)) {
    return invalid(`${name} must be a finite number > 0, got ${n}`)
  }
  return n
}

export const nonNegative = (name: string, n: number): number => {
  if (!(typeof n === "number" && Number.isFinite(n) && n >= 0)) {
    return invalid(`${name} must be a finite number >= 0, got ${n}`)
  }
  return n
}
