import * as core from "@effect-resilience/core/criticality"
import * as HttpHeaders from "@effect-resilience/core/httpHeaders"
import { Effect, FiberRef } from "effect"
import { globalValue } from "effect/GlobalValue"
import { compiled } from "./dual.js"
import * as validate from "./validate.js"

/** The current fiber's criticality; children inherit it on fork, like the deadline. */
export const currentCriticality: FiberRef.FiberRef<core.Criticality> = globalValue(
  "effect-resilience/Criticality/current",
  () => FiberRef.unsafeMake<core.Criticality>("default")
)

export const current: Effect.Effect<core.Criticality> = FiberRef.get(currentCriticality)

const check = (level: core.Criticality): core.Criticality =>
  core.parse(level) === level
    ? level
    : validate.invalid(`Criticality must be critical, default or sheddable, got ${level}`)

/** Validated when called, in both forms, so a bad level fails where it is written. */
export const withCriticality = compiled((level: core.Criticality) => {
  const checked = check(level)
  return <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.locally(self, currentCriticality, checked)
})

export const parse = core.parse

export const headerName = HttpHeaders.criticality
