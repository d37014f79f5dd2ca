{{/*
Names and labels of the gharc-scale-set chart. Object names match ARC's
gha-runner-scale-set chart ("<scale set name>-gha-rs-..."), so `helm upgrade` of an ARC
scale set release to this chart keeps every object, including the ones the controller
protects with the actions.github.com/cleanup-protection finalizer.
*/}}

{{- define "gharc-scale-set.scaleSetName" -}}
{{- default .Release.Name .Values.runnerScaleSetName }}
{{- end }}

{{- define "gharc-scale-set.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "gharc-scale-set.fullname" -}}
{{- printf "%s-gha-rs" (include "gharc-scale-set.scaleSetName" .) | trunc 63 | trimSuffix "-" | replace "_" "-" }}
{{- end }}

{{- define "gharc-scale-set.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "gharc-scale-set.scaleSetName" . }}
app.kubernetes.io/instance: {{ include "gharc-scale-set.scaleSetName" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: gha-rs
actions.github.com/scale-set-name: {{ include "gharc-scale-set.scaleSetName" . }}
actions.github.com/scale-set-namespace: {{ include "gharc-scale-set.namespace" . }}
{{- end }}

{{/*
metadata.labels and metadata.annotations of one chart object: the user's global labels
and annotations, then resourceMeta.<key>, then the reserved ones, which always win (a
user label can never rename the scale set or hide a cleanup annotation).
Call with (dict "ctx" $ "key" "managerRole" "component" "manager-role").
*/}}
{{- define "gharc-scale-set.metadata" -}}
{{- include "gharc-scale-set.metadataRaw" . | trim }}
{{- end }}

{{- define "gharc-scale-set.metadataRaw" -}}
{{- $ctx := .ctx }}
{{- $meta := index (default dict $ctx.Values.resourceMeta) .key | default dict }}
{{- $labels := merge (dict) (default dict $meta.labels) (default dict $ctx.Values.labels) }}
{{- range $k, $_ := $labels }}
{{- if hasPrefix "actions.github.com/" $k }}{{ $_ := unset $labels $k }}{{ end }}
{{- end }}
{{- $labels = merge (include "gharc-scale-set.labels" $ctx | fromYaml) $labels }}
{{- with .component }}{{ $_ := set $labels "app.kubernetes.io/component" . }}{{ end }}
{{- $annotations := merge (dict) (default dict $meta.annotations) (default dict $ctx.Values.annotations) }}
{{- range $k, $_ := $annotations }}
{{- if or (hasPrefix "actions.github.com/cleanup-" $k) (eq $k "actions.github.com/values-hash") }}{{ $_ := unset $annotations $k }}{{ end }}
{{- end }}
{{- $annotations = merge (default dict .extraAnnotations) $annotations }}
labels:
  {{- toYaml $labels | nindent 2 }}
{{- with $annotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Container mode, validated once; "none" (ARC's spelling of no mode) is "". */}}
{{- define "gharc-scale-set.mode" -}}
{{- $mode := (default dict .Values.containerMode).type | default "" }}
{{- if eq $mode "none" }}{{ $mode = "" }}{{ end }}
{{- if not (has $mode (list "" "dind" "kubernetes" "kubernetes-novolume")) }}
{{- fail (printf "containerMode.type must be \"\" (or \"none\"), \"dind\", \"kubernetes\" or \"kubernetes-novolume\", got %q" $mode) }}
{{- end }}
{{- $mode }}
{{- end }}

{{/*
minRunners or maxRunners: a number or a quoted number; null means "not set" (no minimum,
no limit) and a negative number fails, as in ARC's chart. Returns "" or the integer.
Call with (dict "name" "minRunners" "value" .Values.minRunners).
*/}}
{{- define "gharc-scale-set.runnerCount" -}}
{{- $v := .value }}
{{- if not (kindIs "invalid" $v) }}
{{- if and (kindIs "string" $v) (not (regexMatch "^\\s*-?[0-9]+\\s*$" $v)) }}
{{- fail (printf "%s must be a whole number, got %q" .name $v) }}
{{- end }}
{{- $n := int64 (trim (toString $v)) }}
{{- if lt $n 0 }}
{{- fail (printf "%s has to be greater or equal to 0, got %d (leave it unset for no limit)" .name $n) }}
{{- end }}
{{- $n }}
{{- end }}
{{- end }}

{{- define "gharc-scale-set.kubeMode" -}}
{{- if has (include "gharc-scale-set.mode" .) (list "kubernetes" "kubernetes-novolume") }}true{{ end }}
{{- end }}

{{/* The runner pod's own service account, when the template names none. */}}
{{- define "gharc-scale-set.userServiceAccount" -}}
{{- ((default dict .Values.template).spec | default dict).serviceAccountName | default "" }}
{{- end }}

{{- define "gharc-scale-set.githubSecretName" -}}
{{- if kindIs "string" .Values.githubConfigSecret }}
{{- required ".Values.githubConfigSecret is required for setting auth with GitHub server: githubConfigSecret must name a Secret or hold github_token or the github_app_* keys" (.Values.githubConfigSecret | default nil) }}
{{- else }}
{{- include "gharc-scale-set.fullname" . }}-github-secret
{{- end }}
{{- end }}

{{- define "gharc-scale-set.managerRoleName" -}}
{{- include "gharc-scale-set.fullname" . }}-manager
{{- end }}

{{- define "gharc-scale-set.kubeModeName" -}}
{{- include "gharc-scale-set.fullname" . }}-kube-mode
{{- end }}

{{- define "gharc-scale-set.noPermissionName" -}}
{{- include "gharc-scale-set.fullname" . }}-no-permission
{{- end }}

{{/*
The controller's service account: controllerServiceAccount when set, else found from the
controller Deployment's labels (actions.github.com/controller-service-account-*), as ARC
does. Deployments labelled as watching a single namespace only count for that namespace.
`helm template` cannot look anything up, so it needs controllerServiceAccount.
Returns "name/namespace".
*/}}
{{- define "gharc-scale-set.controllerServiceAccount" -}}
{{- $given := default dict .Values.controllerServiceAccount }}
{{- if and (or $given.name $given.namespace) (not (and $given.name $given.namespace)) }}
{{- fail "set both controllerServiceAccount.name and controllerServiceAccount.namespace, or neither (to look the controller up)" }}
{{- end }}
{{- if and $given.name $given.namespace }}
{{- printf "%s/%s" $given.name $given.namespace }}
{{- else }}
{{- $ns := include "gharc-scale-set.namespace" . }}
{{- $all := list }}
{{- $single := list }}
{{- range (lookup "apps/v1" "Deployment" "" "").items }}
{{- $l := default dict .metadata.labels }}
{{- if and (eq (get $l "app.kubernetes.io/part-of") "gha-rs-controller") (get $l "actions.github.com/controller-service-account-name") }}
{{- $found := printf "%s/%s" (get $l "actions.github.com/controller-service-account-name") (get $l "actions.github.com/controller-service-account-namespace") }}
{{- if hasKey $l "actions.github.com/controller-watch-single-namespace" }}
{{- if eq (get $l "actions.github.com/controller-watch-single-namespace") $ns }}{{ $single = append $single $found }}{{ end }}
{{- else }}
{{- $all = append $all $found }}
{{- end }}
{{- end }}
{{- end }}
{{- $candidates := concat $single $all | uniq }}
{{- if eq (len $candidates) 0 }}
{{- fail "no gharc (or ARC) controller Deployment found (label app.kubernetes.io/part-of=gha-rs-controller) that serves this namespace; install charts/gharc-controller first, or set controllerServiceAccount.name and controllerServiceAccount.namespace" }}
{{- else if gt (len $candidates) 1 }}
{{- fail (printf "more than one controller could serve this namespace (%s); set controllerServiceAccount.name and controllerServiceAccount.namespace" (join ", " $candidates)) }}
{{- end }}
{{- first $candidates }}
{{- end }}
{{- end }}
