import * as core from "@effect-resilience/core/rateLimitHeaders"
import { Option } from "effect"

export const parsePolicy = (value: string): Option.Option<ReadonlyArray<core.QuotaPolicy>> =>
  Option.fromNullable(core.parsePolicy(value))

export const parseRateLimit = (value: string): Option.Option<ReadonlyArray<core.ServiceLimit>> =>
  Option.fromNullable(core.parseRateLimit(value))
