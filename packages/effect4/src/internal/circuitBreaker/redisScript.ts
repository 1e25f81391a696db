/**
 * The fleet breaker's one Lua script, loaded through this edition's Redis adapter. Its source, and what it
 * does, are in `core/breakerFleetScript.ts`.
 */
import { fleetScriptSource } from "@effect-resilience/core/breakerFleetScript"
import * as redis from "../redis/client.js"

export const fleetScript = redis.script(fleetScriptSource)
