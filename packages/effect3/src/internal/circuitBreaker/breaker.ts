import type { Context, Scope } from "effect"
import { Effect, Layer } from "effect"
import type { CircuitBreaker, Options, Snapshot, State } from "../../CircuitBreaker.js"
import { Local } from "./local.js"
import { type Config, resolve } from "./policy.js"
import * as Shell from "./shell.js"

export { CircuitOpen } from "./errors.js"
export { rejections, stateGauge, transitions } from "./metrics.js"

export const make = (options: Options): Effect.Effect<CircuitBreaker, never, Scope.Scope> => {
  const config = resolve(options)
  return Effect.flatMap(Shell.env, (e) => build(config, e))
}

export const layer = <I>(tag: Context.Tag<I, CircuitBreaker>, options: Options): Layer.Layer<I> => {
  const config = resolve(options)
  return Layer.scoped(tag, Effect.flatMap(Shell.env, (e) => build(config, e)))
}

/** The state a snapshot restores to, before any time has passed. */
const restoredState = (s: Snapshot | undefined): State =>
  s === undefined ? "closed" : s.isolated || s.state === "open" ? "open" : s.state

/** The public interface over a local breaker and its shell. */
export const breakerOf = (local: Local, shell: Shell.Shell): CircuitBreaker => ({
  protect: local.protect,
  state: Effect.sync(() => local.state()),
  changes: shell.changes,
  subscribe: shell.subscribe,
  isolate: Effect.sync(() => local.isolate()),
  reset: Effect.sync(() => local.reset()),
  snapshot: Effect.sync(() => local.snapshot())
})

/** Builds a local breaker in the current scope (see `local.ts`). */
export const build = (config: Config, e: Shell.Env): Effect.Effect<CircuitBreaker, never, Scope.Scope> =>
  Effect.map(
    Shell.make(config, e, restoredState(config.initialState)),
    (shell) => breakerOf(new Local(shell, config.initialState), shell)
  )
