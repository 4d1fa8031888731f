-- Argo CD health of a stepwise.dev PipelineTrigger, from the conditions the operator writes
-- (docs/install.md#argo-cd): paused by a person, or spec.suspend, is Suspended; Stalled True
-- (its failure budget spent, a gate past its deadline, its template, resource or rights
-- wrong) is Degraded; Ready True, waiting for its window or budget included, is Healthy;
-- an edit the operator has not seen yet is Progressing.
local hs = { status = "Progressing", message = "Waiting for the operator" }
if obj.status == nil then
  return hs
end
if obj.metadata.generation ~= nil and (obj.status.observedGeneration or 0) < obj.metadata.generation then
  hs.message = "Waiting for the operator to see generation " .. obj.metadata.generation
  return hs
end
local ready = nil
local stalled = nil
for _, c in ipairs(obj.status.conditions or {}) do
  if c.type == "Ready" then
    ready = c
  elseif c.type == "Stalled" and c.status == "True" then
    stalled = c
  end
end
if ready == nil then
  return hs
end
hs.message = ready.message
if ready.reason == "Paused" or (obj.spec ~= nil and obj.spec.suspend == true) then
  hs.status = "Suspended"
elseif stalled ~= nil then
  hs.status = "Degraded"
elseif ready.status == "True" then
  hs.status = "Healthy"
end
return hs
