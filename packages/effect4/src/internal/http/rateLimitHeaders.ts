import { Option } from "effect"
import * as core from "../../core/rateLimitHeaders.js"

export const parsePolicy = (value: string): Option.Option<ReadonlyArray<core.QuotaPolicy>> =>
  Option.fromNullishOr(core.parsePolicy(value))

export const parseRateLimit = (value: string): Option.Option<ReadonlyArray<core.ServiceLimit>> =>
  Option.fromNullishOr(core.parseRateLimit(value))
