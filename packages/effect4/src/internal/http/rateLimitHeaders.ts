import * as core from "@effect-resilience/core/rateLimitHeaders"
import { Option } from "effect"

export const parsePolicy = (value: string): Option.Option<ReadonlyArray<core.QuotaPolicy>> =>
  Option.fromNullishOr(core.parsePolicy(value))

export const parseRateLimit = (value: string): Option.Option<ReadonlyArray<core.ServiceLimit>> =>
  Option.fromNullishOr(core.parseRateLimit(value))
