import { Context, Effect, Layer } from "effect"
import type { Budget, Options } from "../RetryBudget.js"
import * as validate from "./validate.js"

export class RetryBudget extends Context.Tag("effect-resilience/RetryBudget")<RetryBudget, Budget>() {}

/** Tokens are counted in thousandths, as gRPC does, so the arithmetic is exact (no float drift). */
const MILLI = 1000

export const unsafeMake = (options: Options): Budget => {
  const { maxTokens, tokenRatio } = validateOptions(options)
  const max = Math.round(maxTokens * MILLI)
  const ratio = Math.round(tokenRatio * MILLI)
  let tokens = max
  const unsafeRecordSuccess = () => {
    tokens = Math.min(max, tokens + ratio)
  }
  const unsafeRecordFailure = () => {
    tokens = Math.max(0, tokens - MILLI)
    return 2 * tokens > max
  }
  return {
    maxTokens,
    tokenRatio,
    tokens: Effect.sync(() => tokens / MILLI),
    recordSuccess: Effect.sync(unsafeRecordSuccess),
    recordFailure: Effect.sync(unsafeRecordFailure),
    unsafeRecordSuccess,
    unsafeRecordFailure
  }
}

const validateOptions = (options: Options): Options => {
  const maxTokens = validate.positive("RetryBudget maxTokens", options.maxTokens)
  const tokenRatio = validate.positive("RetryBudget tokenRatio", options.tokenRatio)
  if (Math.round(maxTokens * MILLI) < 1) validate.invalid(`RetryBudget maxTokens must be >= 0.001, got ${maxTokens}`)
  if (Math.round(tokenRatio * MILLI) < 1) validate.invalid(`RetryBudget tokenRatio must be >= 0.001, got ${tokenRatio}`)
  return { maxTokens, tokenRatio }
}

export const make = (options: Options): Effect.Effect<Budget> => Effect.sync(() => unsafeMake(options))

export const layer = (options: Options): Layer.Layer<RetryBudget> => {
  validateOptions(options)
  return Layer.sync(RetryBudget, () => unsafeMake(options))
}
