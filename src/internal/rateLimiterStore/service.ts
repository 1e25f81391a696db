/**
 * The rate limiter store's tag, defined here and re-exported by `RateLimiterStore.ts`: the stores
 * (`rateLimiterStore/{memory,redis}.ts`) and the limiter reach it without importing a public module.
 */
import { Context } from "effect"
import type { Store } from "../../RateLimiterStore.js"

export class RateLimiterStore extends Context.Tag("effect-resilience/RateLimiterStore")<RateLimiterStore, Store>() {}
