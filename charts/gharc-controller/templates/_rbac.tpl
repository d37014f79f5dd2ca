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

{{/* Read-only watch of CRD kinds the controller caches but does not write there. */}}
{{- define "gharc-controller.rules.watchOnly" -}}
- apiGroups: ["actions.github.com"]
  resources: {{ toJson . }}
  verbs: ["list", "watch"]
{{- end }}

{{/*
Caches of pods, service accounts and RBAC objects (owned children are watched, never
listed per reconcile), plus events: backoff, eviction and failure reasons are recorded on
the object they concern. Roles may be patched: that is how the cleanup-protection finalizer
of a scale set chart's Roles is released. `patchRoles` selects that.
*/}}
{{/* Node loss (flags.nodeLossTimeout): Nodes are cached to see a node go not Ready. */}}
{{- define "gharc-controller.rules.nodes" -}}
{{- if .Values.flags.nodeLossTimeout }}
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["list", "watch"]
{{- end }}
{{- end }}

{{- define "gharc-controller.rules.core" -}}
- apiGroups: [""]
  resources: ["pods", "serviceaccounts"]
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
