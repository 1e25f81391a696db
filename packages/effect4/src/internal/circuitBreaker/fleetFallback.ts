/**
 * A fleet breaker replica's local fallback: while Redis fails or is slower than `timeout`, every call goes
 * through a local breaker of the same options, seeded with the fleet state the replica last knew. It runs on the
 * fleet breaker's own shell (its timer, transitions and metrics): it holds nothing of its own, so switching
 * to it and back is synchronous, and nothing outlives the breaker's scope.
 */
import * as Fleet from "@effect-resilience/core/breakerFleet"
import type { Context, Metric } from "effect"
import { Effect } from "effect"
import type { Snapshot } from "../../CircuitBreaker.js"
import { counterWith, gaugeWith } from "../metrics.js"
import { Local } from "./local.js"
import { fleetFallback, fleetFallbacks } from "./metrics.js"
import type { Failure, Shell } from "./shell.js"

/**
 * Where the outages of one or more replicas are told: the fallback gauge (1 while any of them runs on its
 * own), the fallbacks counter, and one warning when the first falls back and one line when the last rejoins
 * — not one per call, nor one per key of a keyed registry.
 */
export class Outages {
  private down = 0
  private readonly gauge: Metric.Gauge<number>
  private readonly counter: Metric.Counter<number>

  /** `context`: the breaker's, whose `MetricRegistry` the gauge and the counter are in. */
  constructor(
    private readonly name: string,
    attributes: Readonly<Record<string, string>>,
    private readonly context: Context.Context<never>
  ) {
    this.gauge = gaugeWith(fleetFallback, attributes)
    this.counter = counterWith(fleetFallbacks, attributes)
    this.gauge.updateUnsafe(0, context)
  }

  enter(cause: unknown, annotations: Record<string, unknown>): Effect.Effect<void> {
    this.counter.updateUnsafe(1, this.context)
    if (this.down++ > 0) return Effect.void
    this.gauge.updateUnsafe(1, this.context)
    return Effect.logWarning(
      `circuit breaker ${this.name}: Redis failed, this replica uses its own breaker until Redis answers`
    ).pipe(Effect.annotateLogs({
      breaker: this.name,
      ...annotations,
      error: cause instanceof Error ? `${cause.name}: ${cause.message}` : String(cause)
    }))
  }

  /** The gauge is set at once; the line is logged, with what `annotations` says then, when it runs. */
  leave(annotations: () => Record<string, unknown>): Effect.Effect<void> {
    if (--this.down > 0) return Effect.void
    this.gauge.updateUnsafe(0, this.context)
    return Effect.suspend(() =>
      Effect.logInfo(`circuit breaker ${this.name}: Redis answers again, this replica shares the fleet's state`)
        .pipe(Effect.annotateLogs({ breaker: this.name, ...annotations() }))
    )
  }

  /** A replica in fallback went away (its scope closed): the gauge says whether a live one runs on its own. */
  gone(): void {
    if (--this.down === 0) this.gauge.updateUnsafe(0, this.context)
  }
}

export class Fallback {
  /** The local breaker every call goes through, while Redis fails. */
  local: Local | undefined

  constructor(
    private readonly shell: Shell,
    private readonly outages: Outages,
    private readonly annotations: Record<string, unknown>
  ) {}

  /**
   * Switches to a local breaker seeded with `view` as of `at` (open stays open until the same `openUntil`),
   * opened by `opened` when this replica knows it.
   */
  enter(view: Fleet.View, at: number, cause: unknown, opened: Failure | undefined): Effect.Effect<void> {
    const seed: Snapshot = { ...Fleet.saved(view, at), window: null as unknown as Snapshot["window"] }
    this.local = new Local(this.shell, seed, opened)
    return this.outages.enter(cause, { ...this.annotations, state: this.shell.shown() })
  }

  /** Drops the local breaker (what it learned meanwhile is dropped too); the caller shows the fleet's state. */
  leave(): Effect.Effect<void> {
    this.local?.dispose()
    this.local = undefined
    return this.outages.leave(() => ({ ...this.annotations, state: this.shell.shown() }))
  }

  dispose(): void {
    if (this.local === undefined) return
    this.local.dispose()
    this.local = undefined
    this.outages.gone()
  }
}
