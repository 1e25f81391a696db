import { IdempotencyStore } from "../src/index.js"
import { idempotencyStoreSuite } from "./idempotencyStoreSuite.js"

idempotencyStoreSuite("memory", IdempotencyStore.layerMemory)
