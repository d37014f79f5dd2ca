{{/*
RBAC rule sets of the controller (spec §13.5), written once and used by the ClusterRole and
by the two namespaced Roles of watchSingleNamespace mode. Each rule is what a reconciler
does, nothing more: writes to runner pods, secrets and RBAC in a scale set's namespace go
through the per-scale-set manager Role that the gharc-scale-set chart creates there.
*/}}

{{/* Full control of a CRD kind, its status and its finalizers. */}}
{{- define "gharc-controller.rules.own" -}}
- apiGroups: ["actions.github.com"]
  resources: [{{ . | quote }}]
  verbs: ["create", "delete", "get", "list", "patch", "update", "watch"]
- apiGroups: ["actions.github.com"]
  resources: ["{{ . }}/status"]
  verbs: ["get", "patch", "update"]
- apiGroups: ["actions.github.com"]
  resources: ["{{ . }}/finalizers"]
  verbs: ["patch", "update"]
{{- end }}

{{/*
Read-only watch of CRD kinds the controller caches but does not write there: one rule per
kind, as ARC's roles have them (ARC's chart tests count the rules).
*/}}
{{- define "gharc-controller.rules.watchOnly" -}}
{{- range . }}
- apiGroups: ["actions.github.com"]
  resources: [{{ . | quote }}]
  verbs: ["list", "watch"]
{{- end }}
{{- end }}

{{/*
Caches of pods, service accounts and RBAC objects (owned children are watched, never
listed per reconcile), plus events: backoff, eviction and failure reasons are recorded on
the object they concern. Roles may be patched: that is how the cleanup-protection finalizer
of a scale set chart's Roles is released. `patchRoles` selects that; `nodes` adds Nodes to
the cache rule (flags.nodeLossTimeout: a node going not Ready is seen from its Node), which
keeps ARC's number of rules (pods and service accounts share one rule here, where ARC has
two, and events take the place of the second).
*/}}
{{- define "gharc-controller.rules.core" -}}
- apiGroups: [""]
  resources: {{ if .nodes }}["pods", "serviceaccounts", "nodes"]{{ else }}["pods", "serviceaccounts"]{{ end }}
  verbs: ["list", "watch"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["rolebindings"]
  verbs: ["list", "watch"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles"]
  verbs: {{ if .patchRoles }}["list", "watch", "patch"]{{ else }}["list", "watch"]{{ end }}
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}
