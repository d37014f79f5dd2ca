{{/*
ARC 0.14's experimental scale set chart (gha-runner-scale-set-experimental) lays its values
out differently: scaleset.*, auth.*, secretResolution and resource.<object>.metadata. They
are moved here onto the values this chart reads, so both layouts render the same objects;
what gharc has no place for (runner.*, listener.* among them) fails with a message
naming the value to use instead. A value
given in both layouts fails too (which one wins would be a guess).

Every template includes this first. It moves the values once (the experimental keys are
removed from .Values afterwards), so a second include finds nothing to do.
*/}}
{{- define "gharc-scale-set.experimentalValues" -}}
{{- $v := .Values }}
{{- with $v.scaleset }}
{{- include "gharc-scale-set.experimental.scaleset" (dict "v" $v "in" .) }}
{{- end }}
{{- with $v.auth }}
{{- include "gharc-scale-set.experimental.auth" (dict "v" $v "in" .) }}
{{- end }}
{{- with $v.secretResolution }}
{{- include "gharc-scale-set.experimental.secretResolution" (dict "v" $v "in" .) }}
{{- end }}
{{- with $v.resource }}
{{- include "gharc-scale-set.experimental.resource" (dict "v" $v "in" .) }}
{{- end }}
{{- if $v.runner }}
{{- fail "runner.* is a value of ARC's experimental chart that gharc does not map: give the runner pod as template (the container named \"runner\") and runner.mode as containerMode.type, then remove runner" }}
{{- end }}
{{- if $v.listener }}
{{- fail "listener.* is a value of ARC's experimental chart that gharc does not map: give listener.podTemplate as listenerTemplate and listener.metrics as listenerMetrics (the listener's API rate is the controller's), then remove listener" }}
{{- end }}
{{- range $key := list "scaleset" "auth" "secretResolution" "resource" }}
{{- $_ := unset $v $key }}
{{- end }}
{{- end }}

{{/* Set .v.<to> to .val, failing when .v.<to> already holds something else. */}}
{{- define "gharc-scale-set.experimental.move" -}}
{{- $have := index .v .to }}
{{- if and (not (empty $have)) (ne (toJson $have) (toJson .val)) }}
{{- $to := default .to .toName }}
{{- fail (printf "%s and %s are both set: gharc reads %s (ARC's classic layout); keep only that one" .from $to $to) }}
{{- end }}
{{- $_ := set .v .to .val }}
{{- end }}

{{- define "gharc-scale-set.experimental.map" -}}
{{- if not (kindIs "map" .in) }}
{{- fail (printf "%s must be a map (ARC's experimental layout), got %s" .name (kindOf .in)) }}
{{- end }}
{{- $name := .name }}
{{- range $k, $_ := .in }}
{{- if not (has $k $.known) }}
{{- fail (printf "%s.%s is not a value of ARC's experimental chart that gharc knows (known: %s)" $name $k (join ", " $.known)) }}
{{- end }}
{{- end }}
{{- end }}

{{/* scaleset.{name,runnerGroup,labels,minRunners,maxRunners} */}}
{{- define "gharc-scale-set.experimental.scaleset" -}}
{{- $in := .in }}
{{- include "gharc-scale-set.experimental.map" (dict "name" "scaleset" "in" $in "known" (list "name" "runnerGroup" "labels" "minRunners" "maxRunners")) }}
{{- $to := dict "name" "runnerScaleSetName" "runnerGroup" "runnerGroup" "labels" "scaleSetLabels" "minRunners" "minRunners" "maxRunners" "maxRunners" }}
{{- range $from, $target := $to }}
{{- $val := index $in $from }}
{{- /* ARC's controller reads the group "default" (any case) as the default group: "" here. */}}
{{- if and (eq $from "runnerGroup") (kindIs "string" $val) (eq (lower $val) "default") }}{{ $val = "" }}{{ end }}
{{- if or (and (has $from (list "minRunners" "maxRunners")) (not (kindIs "invalid" $val))) (not (empty $val)) }}
{{- include "gharc-scale-set.experimental.move" (dict "v" $.v "from" (printf "scaleset.%s" $from) "to" $target "val" $val) }}
{{- end }}
{{- end }}
{{- end }}

{{/*
auth.url, and one of auth.secretName, auth.app.{clientId,installationId,privateKey} or
auth.githubToken. ARC's experimental chart takes the first of these it finds; gharc
refuses more than one, since the others would be dropped without a word.
*/}}
{{- define "gharc-scale-set.experimental.auth" -}}
{{- $in := .in }}
{{- $v := .v }}
{{- include "gharc-scale-set.experimental.map" (dict "name" "auth" "in" $in "known" (list "url" "githubToken" "secretName" "app")) }}
{{- with $in.url }}
{{- include "gharc-scale-set.experimental.move" (dict "v" $v "from" "auth.url" "to" "githubConfigUrl" "val" .) }}
{{- end }}
{{- $app := default dict $in.app }}
{{- include "gharc-scale-set.experimental.map" (dict "name" "auth.app" "in" $app "known" (list "clientId" "installationId" "privateKey")) }}
{{- $kinds := list }}
{{- if $in.secretName }}{{ $kinds = append $kinds "auth.secretName" }}{{ end }}
{{- if or $app.clientId $app.installationId $app.privateKey }}{{ $kinds = append $kinds "auth.app" }}{{ end }}
{{- if $in.githubToken }}{{ $kinds = append $kinds "auth.githubToken" }}{{ end }}
{{- if gt (len $kinds) 1 }}
{{- fail (printf "%s are all set: give one (gharc's githubConfigSecret takes a Secret name, github_token, or the github_app_* keys)" (join " and " $kinds)) }}
{{- end }}
{{- if $kinds }}
{{- $secret := "" }}
{{- if $in.secretName }}
{{- $secret = $in.secretName }}
{{- else if $in.githubToken }}
{{- $secret = dict "github_token" $in.githubToken }}
{{- else }}
{{- if not (and $app.clientId $app.installationId $app.privateKey) }}
{{- fail "auth.app needs clientId, installationId and privateKey (gharc: githubConfigSecret.github_app_id, github_app_installation_id, github_app_private_key)" }}
{{- end }}
{{- $secret = dict "github_app_id" (toString $app.clientId) "github_app_installation_id" (toString $app.installationId) "github_app_private_key" $app.privateKey }}
{{- end }}
{{- $have := $v.githubConfigSecret }}
{{- $given := false }}
{{- if kindIs "string" $have }}{{ $given = not (empty $have) }}{{ else }}
{{- range $_, $x := (default dict $have) }}{{ if $x }}{{ $given = true }}{{ end }}{{ end }}
{{- end }}
{{- if $given }}
{{- fail (printf "%s and githubConfigSecret are both set: gharc reads githubConfigSecret (ARC's classic layout); keep only that one" (first $kinds)) }}
{{- end }}
{{- $_ := set $v "githubConfigSecret" $secret }}
{{- end }}
{{- end }}

{{/*
secretResolution.type "kubernetes" (the default: credentials in a Kubernetes Secret, its
proxy unused, as in ARC) or "azureKeyVault" (gharc: keyVault with type azure_key_vault;
secretResolution.proxy is the vault's proxy).
*/}}
{{- define "gharc-scale-set.experimental.secretResolution" -}}
{{- $in := .in }}
{{- $v := .v }}
{{- include "gharc-scale-set.experimental.map" (dict "name" "secretResolution" "in" $in "known" (list "type" "proxy" "azureKeyVault")) }}
{{- $type := toString ($in.type | default "kubernetes") }}
{{- if eq $type "azureKeyVault" }}
{{- $az := deepCopy (default dict $in.azureKeyVault) }}
{{- with $in.proxy }}{{ $_ := set $az "proxy" . }}{{ end }}
{{- include "gharc-scale-set.experimental.move" (dict "v" $v "from" "secretResolution" "to" "keyVault" "val" (dict "type" "azure_key_vault" "azureKeyVault" $az)) }}
{{- else if ne $type "kubernetes" }}
{{- fail (printf "secretResolution.type %q is not supported: use \"kubernetes\" or \"azureKeyVault\" (gharc: keyVault.type azure_key_vault)" $type) }}
{{- end }}
{{- end }}

{{/*
resource.<object>.metadata -> resourceMeta.<object>; resource.all.metadata -> labels and
annotations (every object of the chart; the controller passes the AutoscalingRunnerSet's
labels on to the objects it makes); resource.kubernetesModeRole.extraRules ->
containerMode.kubernetesModeAdditionalRoleRules. gharc's manager Role has a fixed set of
rules, so resource.managerRole.extraRules is refused.
*/}}
{{- define "gharc-scale-set.experimental.resource" -}}
{{- $in := .in }}
{{- $v := .v }}
{{- $objects := list "autoscalingRunnerSet" "githubConfigSecret" "managerRole" "managerRoleBinding" "kubernetesModeRole" "kubernetesModeRoleBinding" "kubernetesModeServiceAccount" "noPermissionServiceAccount" "autoscalingListener" "listenerServiceAccount" "listenerRole" "listenerRoleBinding" "listenerConfigSecret" "ephemeralRunnerSet" "ephemeralRunner" "ephemeralRunnerConfigSecret" }}
{{- include "gharc-scale-set.experimental.map" (dict "name" "resource" "in" $in "known" (prepend $objects "all")) }}
{{- $meta := deepCopy (default dict $v.resourceMeta) }}
{{- range $object, $body := $in }}
{{- $body = default dict $body }}
{{- $known := list "metadata" }}
{{- if has $object (list "managerRole" "kubernetesModeRole") }}{{ $known = append $known "extraRules" }}{{ end }}
{{- include "gharc-scale-set.experimental.map" (dict "name" (printf "resource.%s" $object) "in" $body "known" $known) }}
{{- $m := default dict $body.metadata }}
{{- include "gharc-scale-set.experimental.map" (dict "name" (printf "resource.%s.metadata" $object) "in" $m "known" (list "labels" "annotations")) }}
{{- if eq $object "all" }}
{{- range $key := list "labels" "annotations" }}
{{- with (index $m $key) }}
{{- include "gharc-scale-set.experimental.move" (dict "v" $v "from" (printf "resource.all.metadata.%s" $key) "to" $key "val" .) }}
{{- end }}
{{- end }}
{{- else if or $m.labels $m.annotations }}
{{- $have := default dict (index $meta $object) }}
{{- if or $have.labels $have.annotations }}
{{- fail (printf "resource.%s.metadata and resourceMeta.%s are both set: gharc reads resourceMeta.%s (ARC's classic layout); keep only that one" $object $object $object) }}
{{- end }}
{{- $_ := set $meta $object (pick $m "labels" "annotations") }}
{{- end }}
{{- if $body.extraRules }}
{{- if eq $object "managerRole" }}
{{- fail "resource.managerRole.extraRules is not supported: gharc's manager Role holds exactly what the controller needs; grant other rights with a Role of your own" }}
{{- end }}
{{- $mode := deepCopy (default dict $v.containerMode) }}
{{- include "gharc-scale-set.experimental.move" (dict "v" $mode "from" "resource.kubernetesModeRole.extraRules" "to" "kubernetesModeAdditionalRoleRules" "toName" "containerMode.kubernetesModeAdditionalRoleRules" "val" $body.extraRules) }}
{{- $_ := set $v "containerMode" $mode }}
{{- end }}
{{- end }}
{{- $_ := set $v "resourceMeta" $meta }}
{{- end }}
