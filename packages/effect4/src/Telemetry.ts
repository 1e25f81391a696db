/**
 * Switching the library's own telemetry off (Effect 4 only). Its metrics are Effect's `Metric`s and its spans and
 * events Effect's tracer's: docs/observability.md lists every one, and what each costs.
 *
 * - **Metrics**: provide `MetricsEnabled` as `false` and every counter, gauge and histogram update of
 *   effect-resilience is a no-op; your metrics and Effect's own are untouched.
 * - **Traces**: Effect's own switch, `Effect.withTracerEnabled(false)` (`References.TracerEnabled`), turns every
 *   span off, the library's included; with no span, the library's events and attributes cost one check.
 *
 * ```ts
 * import { Effect, Layer } from "effect"
 * import * as Telemetry from "effect-resilience/Telemetry"
 *
 * const program = Effect.void
 * // no metric of the library moves, no span is recorded
 * const quiet = program.pipe(Effect.provideService(Telemetry.MetricsEnabled, false), Effect.withTracerEnabled(false))
 * // or for a whole app built from layers
 * const NoLibraryMetrics = Layer.succeed(Telemetry.MetricsEnabled, false)
 * ```
 *
 * @since 1.0.0
 */
import type { Context } from "effect"
import * as internal from "./internal/metrics.js"

/**
 * Whether effect-resilience records its own metrics (default `true`). Provide `false` — around a program with
 * `Effect.provideService(MetricsEnabled, false)`, or as `Layer.succeed(MetricsEnabled, false)` — and every counter,
 * gauge and histogram update of the library is a no-op there (one context lookup per update); your own metrics
 * and Effect's are untouched.
 *
 * The switch is read where a metric moves: a breaker's, a bulkhead's and an adaptive limiter's gauges and
 * counters in the context the policy was made in, every other metric in the calling fiber's. Switch it at the
 * program's root, so that a gauge never sees half of its moves.
 *
 * @since 1.0.0
 * @category references
 */
export const MetricsEnabled: Context.Reference<boolean> = internal.MetricsEnabled
