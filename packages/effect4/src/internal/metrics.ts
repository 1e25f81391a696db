import { Context, Metric } from "effect"

/*
 * `Metric.withAttributes(metric, attributes)` adds the attributes to the context on every update (a new context
 * each time). A metric built with the same name, description and attributes addresses the same series in the
 * registry, and updates it with no allocation: the library's hot paths use these, readers may use either.
 *
 * Every metric of the library is made by `counter`, `gauge` or `histogram` below: each update and each modify
 * first reads `MetricsEnabled` from the context it is given (one lookup), and does nothing when it is `false`.
 */

/**
 * Whether the library records its own metrics (default `true`). Provide `false` — around a program, or with
 * `Layer.succeed(MetricsEnabled, false)` — and every counter, gauge and histogram update of effect-resilience is
 * a no-op there; your own metrics and Effect's are untouched. The switch is read where a metric moves: a
 * breaker's, bulkhead's or adaptive limiter's gauges and counters in the context the policy was made in, every
 * other metric in the calling fiber's; switch it for the whole program (its root) to keep gauges consistent.
 * Traces have Effect's own switch: `Effect.withTracerEnabled(false)` (`References.TracerEnabled`).
 */
export const MetricsEnabled: Context.Reference<boolean> = Context.Reference<boolean>(
  "effect-resilience/MetricsEnabled",
  { defaultValue: () => true }
)

interface Updatable {
  updateUnsafe(input: unknown, context: Context.Context<never>): void
  modifyUnsafe(input: unknown, context: Context.Context<never>): void
}

/** `metric` with its `updateUnsafe` and `modifyUnsafe` guarded by `MetricsEnabled` (the path of every update). */
const switchable = <M>(metric: M): M => {
  const m = metric as unknown as Updatable
  const update = m.updateUnsafe
  const modify = m.modifyUnsafe
  m.updateUnsafe = function(input, context) {
    if (Context.get(context, MetricsEnabled)) update.call(this, input, context)
  }
  m.modifyUnsafe = function(input, context) {
    if (Context.get(context, MetricsEnabled)) modify.call(this, input, context)
  }
  return metric
}

interface Options {
  readonly description?: string | undefined
  readonly attributes?: Readonly<Record<string, string>> | undefined
}

/** `Metric.counter` (of numbers), switched off by `MetricsEnabled`. */
export const counter = (
  name: string,
  options?: Options & { readonly incremental?: boolean | undefined }
): Metric.Counter<number> => switchable(Metric.counter(name, options))

/** `Metric.gauge` (of numbers), switched off by `MetricsEnabled`. */
export const gauge = (name: string, options?: Options): Metric.Gauge<number> => switchable(Metric.gauge(name, options))

/** `Metric.histogram`, switched off by `MetricsEnabled`. */
export const histogram: typeof Metric.histogram = (
  (name: string, options: Parameters<typeof Metric.histogram>[1]) => switchable(Metric.histogram(name, options))
) as typeof Metric.histogram

/** The counter's series with `attributes`, as `Metric.withAttributes(counter, attributes)` names it. */
export const counterWith = (
  base: Metric.Counter<number>,
  attributes: Readonly<Record<string, string>>
): Metric.Counter<number> => counter(base.id, { description: base.description, incremental: true, attributes })

/** The gauge's series with `attributes`, as `Metric.withAttributes(gauge, attributes)` names it. */
export const gaugeWith = (
  base: Metric.Gauge<number>,
  attributes: Readonly<Record<string, string>>
): Metric.Gauge<number> => gauge(base.id, { description: base.description, attributes })
