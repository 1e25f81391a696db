import { Option } from "effect"
import * as core from "../../core/rateLimitHeaders.js"

export const parsePolicy = (value: string): Option.Option<ReadonlyArray<core.QuotaPolicy>> =>
  Option.fromNullable(core.parsePolicy(value))

export const parseRateLimit = (value: string): Option.Option<ReadonlyArray<core.ServiceLimit>> =>
  Option.fromNullable(core.parseRateLimit(value))
