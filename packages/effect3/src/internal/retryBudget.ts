import * as core from "@effect-resilience/core/retryBudget"
import { Context, Effect, Layer } from "effect"
import type { Budget, Options } from "../RetryBudget.js"
import * as validate from "./validate.js"

export class RetryBudget extends Context.Tag("effect-resilience/RetryBudget")<RetryBudget, Budget>() {}

export const unsafeMake = (options: Options): Budget => {
  const { maxTokens, tokenRatio } = validateOptions(options)
  const params = core.params(maxTokens, tokenRatio)
  // a plain variable, read and written in synchronous steps: fibers of one runtime never run at once
  let tokens = core.initial(params)
  const unsafeRecordSuccess = () => {
    tokens = core.afterSuccess(params, tokens)
  }
  const unsafeRecordFailure = () => {
    tokens = core.afterFailure(tokens)
    return core.allowsRetry(params, tokens)
  }
  return {
    maxTokens,
    tokenRatio,
    tokens: Effect.sync(() => core.toTokens(tokens)),
    recordSuccess: Effect.sync(unsafeRecordSuccess),
    recordFailure: Effect.sync(unsafeRecordFailure),
    unsafeRecordSuccess,
    unsafeRecordFailure
  }
}

const validateOptions = (options: Options): Options => {
  const problem = core.check(options.maxTokens, options.tokenRatio)
  if (problem !== undefined) validate.invalid(`RetryBudget ${problem}`)
  return { maxTokens: options.maxTokens, tokenRatio: options.tokenRatio }
}

export const make = (options: Options): Effect.Effect<Budget> => {
  validateOptions(options)
  return Effect.sync(() => unsafeMake(options))
}

export const layer = (options: Options): Layer.Layer<RetryBudget> => {
  validateOptions(options)
  return Layer.sync(RetryBudget, () => unsafeMake(options))
}
