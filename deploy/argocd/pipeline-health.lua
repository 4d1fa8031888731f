-- Argo CD health of a stepwise.dev Pipeline, from the conditions the operator writes
-- (docs/install.md#argo-cd): Stalled True is Degraded (a step failed for good, a teardown
-- is blocked, the object cannot be decoded: it waits for a person), Ready True is Healthy,
-- a suspended pipeline or a step awaiting approval is Suspended, anything else, and an edit
-- the operator has not seen yet, is Progressing.
local hs = { status = "Progressing", message = "Waiting for the operator" }
if obj.status == nil then
  return hs
end
if obj.metadata.generation ~= nil and (obj.status.observedGeneration or 0) < obj.metadata.generation then
  hs.message = "Waiting for the operator to see generation " .. obj.metadata.generation
  return hs
end
local ready = nil
for _, c in ipairs(obj.status.conditions or {}) do
  if c.type == "Stalled" and c.status == "True" then
    hs.status = "Degraded"
    hs.message = c.message
    return hs
  end
  if c.type == "Ready" then
    ready = c
  end
end
if ready == nil then
  return hs
end
hs.message = ready.message
if ready.status == "True" then
  hs.status = "Healthy"
elseif ready.reason == "Suspended" or ready.reason == "AwaitingApproval" then
  hs.status = "Suspended"
end
return hs
