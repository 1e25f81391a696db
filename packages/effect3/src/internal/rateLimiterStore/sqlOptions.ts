// No @effect/sql import here: the public module loads this eagerly to check options and print the schema.
import { defaultTable, type Dialect, schema, tableRule, validTable } from "@effect-resilience/core/rateLimiterSql"
import type { Duration } from "effect"
import type { Options } from "../../RateLimiterStore/Sql.js"
import * as validate from "../validate.js"

/** Options with defaults applied, durations in milliseconds; checked when the layer is built. */
export interface Resolved {
  readonly table: string
  readonly migrate: boolean
  readonly cleanup: boolean
  readonly cleanupIntervalMillis: number
  readonly cleanupBatch: number
  readonly expiryMarginMillis: number
  readonly timeoutMillis: number
  readonly onError: "deny" | "allow"
  readonly retryAfterOnErrorMillis: number
}

const checkTable = (table: string): string =>
  validTable(table)
    ? table
    : validate.invalid(`RateLimiterStore/Sql table must be ${tableRule}, got ${JSON.stringify(table)}`)

export const sqlSchema = (dialect: Dialect, table: string = defaultTable): ReadonlyArray<string> =>
  schema(dialect, checkTable(table))

const positiveMillis = (name: string, input: Options["timeout"], fallback: Duration.DurationInput): number => {
  const millis = validate.millis(`RateLimiterStore/Sql ${name}`, input ?? fallback, { finite: true })
  return millis > 0 ? millis : validate.invalid(`RateLimiterStore/Sql ${name} must be longer than zero`)
}

export const resolve = (options: Options = {}): Resolved => {
  const onError = options.onError ?? "deny"
  if (onError !== "deny" && onError !== "allow") {
    validate.invalid(`RateLimiterStore/Sql onError must be "deny" or "allow", got ${JSON.stringify(onError)}`)
  }
  return {
    table: checkTable(options.table ?? defaultTable),
    migrate: options.migrate ?? true,
    cleanup: options.cleanup ?? true,
    cleanupIntervalMillis: positiveMillis("cleanupInterval", options.cleanupInterval, "1 minute"),
    cleanupBatch: validate.positiveInt("RateLimiterStore/Sql cleanupBatch", options.cleanupBatch ?? 1000),
    expiryMarginMillis: validate.millis("RateLimiterStore/Sql expiryMargin", options.expiryMargin ?? "1 minute", {
      finite: true
    }),
    timeoutMillis: positiveMillis("timeout", options.timeout, "1 second"),
    onError,
    retryAfterOnErrorMillis: Math.ceil(
      validate.millis("RateLimiterStore/Sql retryAfterOnError", options.retryAfterOnError ?? "1 second", {
        finite: true
      })
    )
  }
}
