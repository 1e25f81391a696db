import * as core from "@effect-resilience/core/criticality"
import * as HttpHeaders from "@effect-resilience/core/httpHeaders"
import { Context, Effect } from "effect"
import { compiled } from "./dual.js"
import * as validate from "./validate.js"

/** The current fiber's criticality; a forked fiber shares the context it was forked with, so it sees it too. */
export const CurrentCriticality: Context.Reference<core.Criticality> = Context.Reference<core.Criticality>(
  "effect-resilience/Criticality/current",
  { defaultValue: () => "default" }
)

export const current: Effect.Effect<core.Criticality> = CurrentCriticality

const check = (level: core.Criticality): core.Criticality =>
  core.parse(level) === level
    ? level
    : validate.invalid(`Criticality must be critical, default or sheddable, got ${level}`)

/** Validated when called, in both forms, so a bad level fails where it is written. */
export const withCriticality = compiled((level: core.Criticality) => {
  const checked = check(level)
  return <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.provideService(self, CurrentCriticality, checked)
})

export const parse = core.parse

export const headerName = HttpHeaders.criticality
