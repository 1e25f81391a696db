import * as core from "@effect-resilience/core/throttle"
import { Clock, type Context, Data, Effect, Exit, Layer, Random } from "effect"
import { dual } from "effect/Function"
import type { AdaptiveThrottle, Options } from "../AdaptiveThrottle.js"
import type * as Api from "../AdaptiveThrottle.js"
import { monotonicMillis } from "./clock.js"
import type { Fields } from "./errorFields.js"
import * as Meter from "./metrics.js"
import { counterWith } from "./metrics.js"
import { eventUnsafe } from "./trace.js"
import * as validate from "./validate.js"

export class LocallyRejected extends Data.TaggedError("LocallyRejected")<Fields<Api.LocallyRejected>> {
  override get message(): string {
    return `rejected locally by adaptive throttling for "${this.key}" (p = ${this.probability.toFixed(3)}): ` +
      "the backend has been refusing most requests"
  }
}

export const rejectionsTotal = Meter.counter("effect_resilience_adaptive_throttle_rejections_total", {
  description: "calls rejected locally by adaptive throttling",
  incremental: true
})

/** Default: a success is accepted; a failure is not; an interruption is not counted as an answer. */
const defaultIsAccepted = (exit: Exit.Exit<unknown, unknown>): boolean | undefined =>
  Exit.isSuccess(exit) ? true : Exit.hasInterrupts(exit) ? undefined : false

const resolve = (options: Options) => {
  const k = options.k ?? core.defaults.k
  if (!(k >= 1 && Number.isFinite(k))) validate.invalid(`AdaptiveThrottle k must be a finite number >= 1, got ${k}`)
  const windowMillis = options.window === undefined
    ? core.defaults.windowMillis
    : validate.millis("AdaptiveThrottle window", options.window, { finite: true })
  if (windowMillis <= 0) validate.invalid("AdaptiveThrottle window must be longer than zero")
  const buckets = validate.positiveInt("AdaptiveThrottle buckets", options.buckets ?? core.defaults.buckets)
  const maxKeys = validate.positiveInt("AdaptiveThrottle maxKeys", options.maxKeys ?? 10_000)
  const maxRejectionRate = options.maxRejectionRate ?? core.defaults.maxRejectionRate
  if (!(maxRejectionRate >= 0 && maxRejectionRate <= 1)) {
    validate.invalid(`AdaptiveThrottle maxRejectionRate must be a number in [0, 1], got ${maxRejectionRate}`)
  }
  const config: core.Config = { windowMillis, buckets, k, maxRejectionRate }
  return { config, maxKeys, isAccepted: options.isAccepted ?? defaultIsAccepted, name: options.name }
}

export const make = (options: Options = {}): Effect.Effect<AdaptiveThrottle> => {
  const resolved = resolve(options)
  return Effect.map(Effect.context<never>(), (context) => build(resolved, context))
}

export const layer = <I>(tag: Context.Key<I, AdaptiveThrottle>, options: Options = {}): Layer.Layer<I> => {
  const resolved = resolve(options)
  return Layer.effect(tag, Effect.map(Effect.context<never>(), (context) => build(resolved, context)))
}

const build = (
  { config, isAccepted, maxKeys, name }: ReturnType<typeof resolve>,
  // the registry the rejections are counted in: the context the throttle was built in (as a bulkhead's metrics)
  context: Context.Context<never>
): AdaptiveThrottle => {
  const rejections = name === undefined ? rejectionsTotal : counterWith(rejectionsTotal, { throttle: name })
  // least recently used first: a key touched moves to the end, the first one goes when there are too many
  const windows = new Map<string, core.Window>()
  const windowOf = (key: string, now: number): core.Window => {
    let window = windows.get(key)
    if (window === undefined) {
      window = core.makeWindow(config, now)
      if (windows.size >= maxKeys) windows.delete(windows.keys().next().value!)
    } else {
      windows.delete(key)
    }
    windows.set(key, window)
    return window
  }

  const protect = <A, E, R>(self: Effect.Effect<A, E, R>, key: string): Effect.Effect<A, E | LocallyRejected, R> =>
    Effect.withFiber((fiber) => {
      const clock = fiber.getRef(Clock.Clock)
      const now = monotonicMillis(clock)
      const window = windowOf(key, now)
      const probability = core.probabilityAt(config, window, now)
      // no draw while nothing would be rejected: a throttle must not shift a seeded Random sequence for nothing
      const decide = (draw: number): Effect.Effect<A, E | LocallyRejected, R> => {
        if (!core.admit(config, window, now, draw)) {
          rejections.updateUnsafe(1, context)
          eventUnsafe(fiber.context, "AdaptiveThrottle.rejected", () => ({
            ...(name === undefined ? {} : { throttle: name }),
            "throttle.key": key,
            "throttle.probability": probability
          }))
          return Effect.fail(new LocallyRejected({ key, probability }))
        }
        return Effect.onExit(self, (exit) =>
          Effect.sync(() => {
            if (isAccepted(exit) === true) core.recordAccept(config, window, monotonicMillis(clock))
          }))
      }
      return probability === 0 ? decide(1) : Effect.flatMap(Random.next, decide)
    })

  return {
    protect: dual(2, protect),
    probability: (key) =>
      Effect.clockWith((clock) =>
        Effect.sync(() => {
          const window = windows.get(key)
          return window === undefined ? 0 : core.probabilityAt(config, window, monotonicMillis(clock))
        })
      )
  }
}
