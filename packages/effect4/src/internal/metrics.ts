import { Metric } from "effect"

/*
 * `Metric.withAttributes(metric, attributes)` adds the attributes to the context on every update (a new context
 * each time). A metric built with the same name, description and attributes addresses the same series in the
 * registry, and updates it with no allocation: the library's hot paths use these, readers may use either.
 */

/** The counter's series with `attributes`, as `Metric.withAttributes(counter, attributes)` names it. */
export const counterWith = (
  counter: Metric.Counter<number>,
  attributes: Readonly<Record<string, string>>
): Metric.Counter<number> =>
  Metric.counter(counter.id, { description: counter.description, incremental: true, attributes })

/** The gauge's series with `attributes`, as `Metric.withAttributes(gauge, attributes)` names it. */
export const gaugeWith = (
  gauge: Metric.Gauge<number>,
  attributes: Readonly<Record<string, string>>
): Metric.Gauge<number> => Metric.gauge(gauge.id, { description: gauge.description, attributes })
